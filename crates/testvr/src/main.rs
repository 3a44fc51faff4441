//! `vrhost-testvr`: the test and bench VRs, one per subcommand (started by
//! the host as a VR program with the subcommand as its argument).

use std::process::ExitCode;

use vrhost_testvr::{hostile, probe, spin, syscall};

const USAGE: &str = "usage: vrhost-testvr vr-hostile | vr-probe | vr-spin | vr-run-syscall
(VR programs for vrhost's tests and benches, started by the host)";

fn main() -> ExitCode {
    let cmd = std::env::args().nth(1);
    match cmd.as_deref() {
        Some("vr-hostile") => hostile::main(),
        Some("vr-probe") => probe::main(),
        Some("vr-spin") => spin::main(),
        Some("vr-run-syscall") => match syscall::main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vrhost-testvr vr-run-syscall: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
