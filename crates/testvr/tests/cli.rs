//! The `vrhost-testvr` program outside a host: it names its subcommands,
//! and a VR started without a control socket says so instead of running.
//! (This test is also what makes `cargo test --workspace` build the
//! program beside `vrhost`, where the other crates' tests find it.)

use std::process::Command;

fn testvr(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost-testvr"))
        .args(args)
        .env_remove("VRHOST_CTRL_FD")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unknown_subcommand_is_refused_with_the_list() {
    for args in [&[][..], &["vr-run"], &["--help"]] {
        let (code, err) = testvr(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        for sub in ["vr-hostile", "vr-probe", "vr-spin", "vr-run-syscall"] {
            assert!(err.contains(sub), "{args:?}: {err}");
        }
    }
}

#[test]
fn a_vr_without_a_control_socket_does_not_run() {
    for sub in ["vr-hostile", "vr-probe", "vr-spin", "vr-run-syscall"] {
        let (code, err) = testvr(&[sub]);
        assert_eq!(code, Some(1), "{sub}: {err}");
        assert!(err.contains("VRHOST_CTRL_FD"), "{sub}: {err}");
    }
}

#[test]
fn the_tests_find_it_beside_their_executable() {
    let me = std::env::current_exe().unwrap();
    let found = vrhost_testvr::beside(&me).expect("beside the test executable");
    assert_eq!(
        found.canonicalize().unwrap(),
        std::path::Path::new(env!("CARGO_BIN_EXE_vrhost-testvr"))
            .canonicalize()
            .unwrap()
    );
}
