//! What a tenant's VR links: the SDK's normal dependencies (what
//! `examples/udp_filter_bridge.rs` and any VR built on the SDK pull in) stay
//! free of the benches' and the command line's crates. And, workspace-wide,
//! no library crate depends on `anyhow` (errors of libraries are their own
//! `thiserror` enums; `anyhow` is for the binary's top level).

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

/// The standard output of `cargo ARGS`, run in this crate's directory by
/// the cargo running the tests; panics with cargo's error output if it fails.
fn cargo(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The package names in `cargo tree -e normal -p <package>`.
fn normal_deps(package: &str) -> BTreeSet<String> {
    let tree = cargo(&[
        "tree", "-e", "normal", "--prefix", "none", "--format", "{p}", "-p", package,
    ]);
    String::from_utf8(tree)
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

#[test]
fn no_library_depends_on_anyhow() {
    let metadata = cargo(&["metadata", "--no-deps", "--format-version", "1"]);
    let meta: serde_json::Value = serde_json::from_slice(&metadata).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let libs: Vec<&serde_json::Value> = packages
        .iter()
        .filter(|p| {
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "lib"))
        })
        .collect();
    assert!(
        libs.iter().any(|p| p["name"] == "vrhost-sdk"),
        "the workspace's libraries are listed"
    );
    let with_anyhow: Vec<&str> = libs
        .iter()
        .filter(|p| {
            p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["name"] == "anyhow" && d["kind"].is_null())
        })
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        with_anyhow.is_empty(),
        "libraries with anyhow: {with_anyhow:?}"
    );
}
