//! What a tenant's VR links: the SDK's normal dependencies (what
//! `examples/udp_filter_bridge.rs` and any VR built on the SDK pull in) stay
//! free of the benches' and the command line's crates.

use std::collections::BTreeSet;
use std::process::Command;

/// Crates that belong to the benches or the binary's command line, never to
/// a VR.
const NOT_IN_A_VR: [&str; 10] = [
    "clap",
    "anyhow",
    "rand",
    "prefix-trie",
    "ip_network_table",
    "iptrie",
    "ipnet",
    "ip_network",
    "vrhost-fib",
    "vrhost-router",
];

/// The package names in `cargo tree -e normal -p <package>`.
fn normal_deps(package: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree", "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .args(["-p", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_sdk_links_no_bench_or_cli_crate() {
    for package in ["vrhost-sdk", "vrhost-proto"] {
        let deps = normal_deps(package);
        assert!(
            deps.contains(package),
            "{package} in its own tree: {deps:?}"
        );
        let bad: Vec<_> = NOT_IN_A_VR.iter().filter(|d| deps.contains(**d)).collect();
        assert!(bad.is_empty(), "{package} links {bad:?}");
    }
}
