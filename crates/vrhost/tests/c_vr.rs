//! A VR written in C (`crates/sdk-c/examples/c/udp_filter_bridge.c`),
//! compiled here with the system's C compiler against the C SDK's header
//! and static library, runs as a VR of a host worker: it forwards one
//! tenant's frames, filters the other's, answers control messages, and a
//! bad config is refused at start with the C VR's own message.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::TempDir;
use common::datapath::{run_until, spec, two_tenant_worker};
use serde_json::{Value, json};
use vrhost_host::{Backend, Confine, VrCommand, VrPath, VrProcess};
use vrhost_proto::PollConfig;

/// The C SDK's static library of this build (cargo puts a dependency's
/// `staticlib` in `deps/` beside the test; the newest is this build's).
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let mut libs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(deps)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?;
            (name.starts_with("libvrhost_sdk_c") && name.ends_with(".a"))
                .then(|| Some((p.metadata().ok()?.modified().ok()?, p)))?
        })
        .collect();
    libs.sort();
    libs.pop()
        .unwrap_or_else(|| panic!("no libvrhost_sdk_c*.a in {}", deps.display()))
        .1
}

/// The example compiled into `dir`, warnings as errors.
fn compile(dir: &Path) -> PathBuf {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-c");
    let out = dir.join("udp_filter_bridge");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args([
            "-std=c11",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-I",
        ])
        .arg(sdk.join("include"))
        .arg(sdk.join("examples/c/udp_filter_bridge.c"))
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e} (install a C compiler: scripts/install)"));
    assert!(st.success(), "{cc} failed on the C example");
    out
}

fn command(program: &Path, config: Value) -> VrCommand {
    VrCommand {
        program: program.to_path_buf(),
        args: vec![],
        cpu: None,
        poll: PollConfig::default(),
        config,
        ready_timeout: Duration::from_secs(30),
        idle_start: Duration::ZERO,
        confine: Confine::default(),
        hurry: Default::default(),
    }
}

#[test]
fn a_c_vr_forwards_filters_and_answers_control() {
    let dir = TempDir::new("c-vr");
    let program = compile(dir.path());
    let mut worker = two_tenant_worker();
    // Tenant 0's VR blocks port 53 (its frames go to 1024: forwarded),
    // tenant 1's blocks 1024 (all its frames: filtered).
    let mut controls = Vec::new();
    for (name, port) in [("pass", 53), ("block", 1024)] {
        let spec = spec(name, 256);
        let region = spec.create_region().unwrap();
        let cmd = command(&program, json!({ "block_udp_port": port }));
        let (p, bell) = VrProcess::start(name, 0, &region, worker.bell(), &cmd).unwrap();
        controls.push(p.control().unwrap());
        worker.add_vr(VrPath::assemble(
            &spec,
            region,
            Backend::Process(vec![p]),
            vec![bell],
        ));
    }
    let (pass, block) = (
        worker.vrs()[0].stats().clone(),
        worker.vrs()[1].stats().clone(),
    );
    run_until(&mut worker, Duration::from_secs(20), |_| {
        pass.tx_packets.get() > 1000 && block.vr_dropped.get() > 1000
    });
    assert!(
        pass.tx_packets.get() > 1000,
        "pass forwarded {}",
        pass.tx_packets.get()
    );
    assert_eq!(pass.vr_dropped.get(), 0);
    assert!(
        block.vr_dropped.get() > 1000,
        "block dropped {}",
        block.vr_dropped.get()
    );
    assert_eq!(block.tx_packets.get(), 0);

    let counters = json!({ "op": "counters" });
    let t = Duration::from_secs(5);
    let a = controls[0].request(&counters, t).unwrap();
    let b = controls[1].request(&counters, t).unwrap();
    assert!(
        a["forwarded"].as_u64().unwrap() >= pass.tx_packets.get(),
        "{a}"
    );
    assert_eq!(a["filtered"], 0, "{a}");
    assert!(
        b["filtered"].as_u64().unwrap() >= block.vr_dropped.get(),
        "{b}"
    );
    let e = controls[0]
        .request(&json!({ "op": "reboot" }), t)
        .unwrap_err();
    assert!(e.to_string().contains("unknown control message"), "{e}");
    worker.shutdown();
}

#[test]
fn a_bad_config_is_refused_with_the_c_vrs_message() {
    let dir = TempDir::new("c-vr-bad");
    let program = compile(dir.path());
    let spec = spec("bad", 64);
    let region = spec.create_region().unwrap();
    let host_bell = vrhost_shm::Doorbell::new().unwrap();
    let cmd = command(&program, json!({ "block_udp_port": "dns" }));
    let e = VrProcess::start("bad", 0, &region, &host_bell, &cmd).unwrap_err();
    assert!(
        e.to_string()
            .contains("block_udp_port must be a port number"),
        "{e}"
    );
}
