//! `cargo run --release -p vrhost-fib --example bench_fib -- [--table FILE] [--json]`:
//! the same as `vrhost bench fib`, for use before the binary wires it.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: vrhost_fib::cli::BenchFibArgs,
}

fn main() -> anyhow::Result<()> {
    vrhost_fib::cli::run_cli(&Cli::parse().args)
}
