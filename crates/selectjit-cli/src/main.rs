//! The `selectjit` command: `run`, `bench`, `explain`, `info`, `aot`.

fn main() {
    std::process::exit(selectjit_cli::main());
}
