//! The `selectjit` command: `run`, `bench`, `explain`, `info`.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
