//! The daemon's config parser: any UTF-8 text through `Config::parse`
//! (TOML, the schema, the checks, the built-in router's config of each
//! router VR built once) returns a config and a plan or an error, never a
//! panic. Seeded with the repository's example configs, so most inputs are
//! mutated valid configs.
//!
//! Also checked: an accepted config's plan is consistent (one port index
//! per vNIC, each a port of the plan; pool sizes in range; as many
//! classifier rules as `rules`), and an error message names the file.
//!
//! A router table's `route_file` is read from disk by `Router::new`: only
//! inputs whose route files are plain names (resolved in a directory of
//! this harness's, holding `routes.txt`) are parsed, so that the fuzzer
//! cannot make the parser read a device or a large file.
#![no_main]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use vrhost_host::config::{Config, ConfigError};

const FILE: &str = "fuzz.toml";

/// A directory for relative paths, with a small route file (`routes.txt`)
/// and a VR program (`my-vr`) in it.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join("vrhost-fuzz-config");
        std::fs::create_dir_all(&d).expect("temp dir");
        std::fs::write(
            d.join("routes.txt"),
            "; IP-ASN32-DAT file\n10.8.0.0/16\t64512\n198.51.100.0/24\t65000\n",
        )
        .expect("route file");
        // A VR program (never run): an executable file.
        let prog = d.join("my-vr");
        std::fs::write(&prog, "#!/bin/sh\n").expect("program");
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        d
    })
}

/// Whether every `route_file` value in the document (wherever the key
/// sits) is a plain file name.
fn route_files_ok(v: &toml::Value) -> bool {
    match v {
        toml::Value::Table(t) => t.iter().all(|(k, v)| {
            let plain = |s: &str| {
                !s.is_empty() && s.len() <= 32 && !s.contains(['/', '\\', '\0']) && s != ".."
            };
            (k != "route_file" || v.as_str().is_none_or(plain)) && route_files_ok(v)
        }),
        toml::Value::Array(a) => a.iter().all(route_files_ok),
        _ => true,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    // The same TOML parser as the config's: what it refuses, the config
    // refuses too (checked below).
    let doc = toml::from_str::<toml::Table>(src);
    if let Ok(t) = &doc
        && !route_files_ok(&toml::Value::Table(t.clone()))
    {
        return;
    }
    match Config::parse(src, FILE, dir()) {
        Ok((cfg, plan)) => {
            assert!(doc.is_ok(), "a config that is not TOML was accepted");
            assert_eq!(plan.ports.len(), cfg.ports.len());
            assert_eq!(plan.gens.len(), cfg.ports.len());
            assert_eq!(plan.vrs.len(), cfg.vrs.len());
            assert_eq!(plan.classifier.len(), cfg.rules.len());
            for v in &plan.vrs {
                assert!((2..=65_536).contains(&v.slots));
                assert!((1..=64).contains(&v.vnic_ports.len()));
                assert!(v.vnic_ports.iter().all(|&p| p < plan.ports.len()));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(FILE), "{msg}");
            if let ConfigError::Field { line, .. } = e {
                assert!(line <= src.lines().count() + 1, "line {line}: {msg}");
            }
        }
    }
});
