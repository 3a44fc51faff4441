//! The fuzz seeds parse as intended (so the fuzzers start from valid inputs).

use std::path::Path;

use vrhost_fib::import::{Format, ImportOptions, parse_mrt, read_routes};

fn seed(p: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(p)
}

#[test]
fn mrt_seeds() {
    let whole = std::fs::read(seed("mrt/dump.mrt")).unwrap();
    let (routes, st) = parse_mrt(&whole, false).unwrap();
    assert_eq!(
        (routes.len(), st.records, st.skipped_records, st.peers),
        (3, 5, 1, 2)
    );
    assert_eq!(routes[2].nexthop, Some("2001:db8::1".parse().unwrap()));
    assert_eq!(routes[2].asn, Some(65010));
    let cut = std::fs::read(seed("mrt/cut.mrt")).unwrap();
    assert!(
        parse_mrt(&cut, false)
            .unwrap_err()
            .to_string()
            .contains("offset")
    );
    for f in ["text/dump.mrt.bz2", "text/dump.mrt.gz"] {
        let set = read_routes(&seed(f), &ImportOptions::default()).unwrap();
        assert_eq!((set.format, set.routes.len()), (Format::Mrt, 3), "{f}");
    }
}

#[test]
fn text_seeds() {
    for (f, fmt, n) in [
        ("plain.txt", Format::Text, 3),
        ("ipasn.txt", Format::Ipasn, 2),
        ("ipasn.gz", Format::Ipasn, 1),
        ("plain.bz2", Format::Text, 1),
    ] {
        let set = read_routes(&seed(&format!("text/{f}")), &ImportOptions::default()).unwrap();
        assert_eq!((set.format, set.routes.len()), (fmt, n), "{f}");
    }
    assert!(
        read_routes(&seed("text/badlen.txt"), &ImportOptions::default())
            .unwrap_err()
            .to_string()
            .contains("line 1")
    );
}
