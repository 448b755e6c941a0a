//! The `selectjit` command.
fn main() {
    println!("selectjit {}", env!("CARGO_PKG_VERSION"));
}
