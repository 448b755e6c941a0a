//! The `selectjit` command: `run`, `bench`, `explain`, `info`, `aot`.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
