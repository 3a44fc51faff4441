//! Imports of the real dumps in `../shared/data` (skipped with a note when absent): the cut
//! MRT files report the cut where the data README says it is, and the full ipasn table
//! built into the FIB answers like `prefix-trie` on random addresses.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng, rngs::SmallRng};
use vrhost_fib::Ipv4Fib;
use vrhost_fib::import::{Format, ImportError, ImportOptions, read_routes};

fn data(rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} not found", p.display());
        None
    }
}

fn check_cut(rel: &str, offset: u64, ribs: usize, v6: bool) {
    let Some(p) = data(rel) else { return };
    match read_routes(&p, &ImportOptions::default()) {
        Err(ImportError::Truncated {
            offset: o,
            records_kept,
            ..
        }) => {
            assert_eq!((o, records_kept), (offset, ribs as u64 + 1));
        }
        other => panic!("expected a truncation error, got {other:?}"),
    }
    let set = read_routes(
        &p,
        &ImportOptions {
            keep_partial: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(set.format, Format::Mrt);
    let t = set.stats.truncated.as_ref().unwrap();
    assert_eq!((t.offset, t.records_kept), (offset, ribs as u64 + 1));
    let (n4, n6) = set.counts();
    assert_eq!(if v6 { (0, ribs) } else { (ribs, 0) }, (n4, n6));
    assert!(
        set.routes.iter().all(|r| r.nexthop.is_some()),
        "every RIB entry has a next hop"
    );
    assert!(set.routes.iter().filter(|r| r.asn.is_some()).count() > ribs * 9 / 10);
}

#[test]
fn mrt_ipv4_cut_dump() {
    check_cut(
        "mrt/rib.20140523.0600_firstMB.bz2",
        15_273_283,
        9_072,
        false,
    );
}

#[test]
fn mrt_ipv6_cut_dump() {
    check_cut(
        "mrt/rib6.20151101.0600_firstMB.bz2",
        12_131_168,
        6_870,
        true,
    );
}

#[test]
fn ipasn_full_table_matches_prefix_trie() {
    let Some(p) = data("fib/ipasn_20140513.dat.gz") else {
        return;
    };
    let set = read_routes(&p, &ImportOptions::default()).unwrap();
    assert_eq!(set.format, Format::Ipasn);
    assert_eq!(set.routes.len(), 512_621);
    let mut fib = Ipv4Fib::new();
    let mut reference = prefix_trie::PrefixMap::<(u32, u8), u32>::new();
    for r in set.ipv4() {
        let nh = r.asn.unwrap() & 0xffff;
        fib.insert(r.prefix, r.len, nh).unwrap();
        reference.insert((r.prefix, r.len), nh);
    }
    assert_eq!(fib.len(), 512_621);
    assert!(fib.mem_bytes() < 100 << 20, "{} bytes", fib.mem_bytes());
    let mut rng = SmallRng::seed_from_u64(1);
    let addrs: Vec<u32> = (0..200_000).map(|_| rng.random()).collect();
    let mut out = vec![None; addrs.len()];
    fib.lookup_batch(&addrs, &mut out);
    for (a, o) in addrs.iter().zip(&out) {
        assert_eq!(*o, reference.get_lpm(&(*a, 32)).map(|(_, &n)| n), "{a:#x}");
    }
}
