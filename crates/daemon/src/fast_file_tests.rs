//! A VR's route file in the fast path: its routes in the trie under the
//! API's and over the config's (as the router has them), read again when
//! the file changes, gone with it; checked on frames with
//! `BPF_PROG_TEST_RUN` (needs root).

use std::path::{Path as FsPath, PathBuf};

use vrhost_host::config::Config;
use vrhost_router::RouteConfig;

use super::modes_tests::{config, frame, hop, state};
use super::*;

/// A directory of its own for the test's route file, removed on drop.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// ipasn lines: ASN 64500 is next hop 0 of 2, 64501 next hop 1.
const V1: &str = "198.51.100.0/24\t64500\n203.0.113.0/24\t64501\n192.0.2.128/25\t64500\n";
const V2: &str = "198.51.100.0/24\t64501\n";

fn with_file(file: &FsPath) -> Plan {
    let route = r#"{ prefix = "203.0.113.0/24", nexthop = 0 }"#;
    let cfg = config("dst", route, "").replace(
        "[vrs.router]\n",
        &format!(
            "[vrs.router]\nroute_file = {:?}\n",
            file.display().to_string()
        ),
    );
    Config::parse(&cfg, "t", FsPath::new("."))
        .expect("config")
        .1
}

#[test]
fn a_route_file_s_routes_reach_the_fast_path_and_follow_the_file() {
    let dir = Dir(std::env::temp_dir().join(format!("vrhost-fastfile-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("mkdir");
    let file = dir.0.join("routes.ipasn");
    std::fs::write(&file, V1).expect("write the file");
    let (mut st, _) = state(&config("dst", "", ""));
    let plan = with_file(&file);
    st.reconcile(&plan, &|_| None).expect("reconcile");
    let to = |st: &mut FastState, d: [u8; 4]| hop(st, &frame([10, 0, 1, 7], d));
    assert_eq!(to(&mut st, [198, 51, 100, 9]), Some(0));
    assert_eq!(
        to(&mut st, [203, 0, 113, 9]),
        Some(1),
        "the file's over the config's"
    );
    assert_eq!(to(&mut st, [192, 0, 2, 130]), Some(0));
    assert_eq!(to(&mut st, [192, 0, 2, 5]), None, "no route");
    // An API route over the file's, then gone: the file's again.
    let api = BTreeMap::from([(
        (0xcb00_7100, 24),
        RouteConfig {
            prefix: "203.0.113.0/24".into(),
            nexthop: Some(0),
            ..RouteConfig::default()
        },
    )]);
    st.reconcile(&plan, &|_| Some(&api)).expect("reconcile");
    assert_eq!(
        to(&mut st, [203, 0, 113, 9]),
        Some(0),
        "the API's over the file's"
    );
    st.reconcile(&plan, &|_| None).expect("reconcile");
    assert_eq!(to(&mut st, [203, 0, 113, 9]), Some(1));
    // The file rewritten (another size): read again, only the change
    // written; the config route under it uncovered.
    std::fs::write(&file, V2).expect("rewrite the file");
    st.reconcile(&plan, &|_| None).expect("reconcile");
    assert_eq!(to(&mut st, [198, 51, 100, 9]), Some(1));
    assert_eq!(to(&mut st, [203, 0, 113, 9]), Some(0), "the config's");
    assert_eq!(to(&mut st, [192, 0, 2, 130]), None, "gone with the file");
    // No file: its routes gone.
    let (_, none) = Config::parse(&config("dst", "", ""), "t", FsPath::new(".")).expect("config");
    st.reconcile(&none, &|_| None).expect("reconcile");
    assert_eq!(to(&mut st, [198, 51, 100, 9]), None);
    // A file gone: the reconcile says so, naming the VR and the file.
    std::fs::remove_file(&file).expect("rm");
    let e = st.reconcile(&plan, &|_| None).expect_err("no file");
    assert!(e.contains("VR a") && e.contains("routes.ipasn"), "{e}");
}
