//! `cargo run --release -p vrhost-fib --example route_import -- FILE [--keep-partial]`:
//! the same as `vrhost route import`, for use before the binary wires it.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: vrhost_fib::cli::RouteImportArgs,
}

fn main() -> anyhow::Result<()> {
    vrhost_fib::cli::run_route_import(&Cli::parse().args, None).map(|_| ())
}
