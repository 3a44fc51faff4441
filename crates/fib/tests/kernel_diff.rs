//! Differential test against the Linux kernel's FIB: the same routes are loaded into a
//! fresh network namespace (`ip -batch`, routes via a veth end; no traffic is sent) and
//! into an `Ipv4Fib`, some are deleted from both, then `ip route get` answers for a few
//! thousand random addresses are compared with vrhost's. Skipped (with a note) unless root
//! with `ip` available.
//!
//! Probed addresses avoid 0/8, 127/8, 192/8 and 224/3 (the kernel answers those from its
//! local table or with special route types, which a FIB does not model); routes avoid
//! 127/8 and 192/8 (192.0.2.0/24 is the link the gateways sit on).

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use rand::{Rng, SeedableRng, rngs::SmallRng};
use vrhost_fib::{Ipv4Fib, Key};

/// Deletes the namespace when dropped, also when the test fails.
struct Netns(String);

impl Netns {
    fn new() -> Option<Self> {
        let name = format!("vrhost-fibtest-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .ok()?
            .success();
        ok.then_some(Self(name))
    }

    /// Run `ip -n NS -batch -` with `cmds`; returns stdout.
    fn batch(&self, cmds: &str) -> String {
        let mut child = Command::new("ip")
            .args(["-n", &self.0, "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ip");
        // Write from another thread: `ip` blocks on a full stdout pipe while we write.
        let mut stdin = child.stdin.take().expect("stdin");
        let input = cmds.to_owned();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().expect("ip -batch");
        writer.join().expect("writer thread").expect("write batch");
        assert!(
            out.status.success(),
            "ip -batch failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn usable() -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("kernel_diff: skipped (needs root for a network namespace)");
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("kernel_diff: skipped (no `ip` command)");
        return false;
    }
    true
}

fn first_octet_ok_for_route(o: u32) -> bool {
    (1..=223).contains(&o) && o != 127 && o != 192
}

#[test]
fn ipv4_matches_linux_fib() {
    if !usable() {
        return;
    }
    let Some(ns) = Netns::new() else {
        eprintln!("kernel_diff: skipped (ip netns add failed)");
        return;
    };
    ns.batch("link add v0 type veth peer name v1\nlink set v0 up\nlink set v1 up\naddr add 192.0.2.254/24 dev v0\n");
    let mut rng = SmallRng::seed_from_u64(7);
    let mut fib = Ipv4Fib::new();
    // Next hop k = "via 192.0.2.k"; 0 = the connected 192.0.2.0/24; 250 = default.
    fib.insert(0xc000_0200, 24, 0).unwrap();
    fib.insert(0, 0, 250).unwrap();
    let mut cmds = String::from("route add default via 192.0.2.250 dev v0\n");
    let mut routes = Vec::new();
    while routes.len() < 3000 {
        // Nested prefixes: half of them inside an earlier one.
        let base: u32 = match routes.last() {
            Some(&(p, _)) if rng.random_bool(0.5) => p ^ (rng.random::<u32>() >> 12),
            _ => rng.random(),
        };
        let len = rng.random_range(8..=32u8);
        let p = base.mask(len);
        if !first_octet_ok_for_route(p >> 24) {
            continue;
        }
        let nh = rng.random_range(1..=16u32);
        fib.insert(p, len, nh).unwrap();
        cmds += &format!(
            "route replace {}/{len} via 192.0.2.{nh} dev v0\n",
            Ipv4Addr::from(p)
        );
        routes.push((p, len));
    }
    // Delete a third: shorter prefixes must show through again.
    for &(p, len) in routes.iter().step_by(3) {
        if fib.remove(p, len).is_some() {
            cmds += &format!("route del {}/{len}\n", Ipv4Addr::from(p));
        }
    }
    ns.batch(&cmds);
    let mut addrs: Vec<u32> = routes
        .iter()
        .flat_map(|&(p, l)| [p, p | u32::MAX.checked_shr(u32::from(l)).unwrap_or(0)])
        .collect();
    addrs.extend((0..3000).map(|_| rng.random::<u32>()));
    addrs.push(0xc000_024d); // 192.0.2.77: the connected route
    addrs.retain(|&a| {
        let o = a >> 24;
        (a == 0xc000_024d || first_octet_ok_for_route(o)) && a != 0xc000_02fe
    });
    let gets: String = addrs
        .iter()
        .map(|&a| format!("route get {}\n", Ipv4Addr::from(a)))
        .collect();
    let out = ns.batch(&gets);
    let answers: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .collect();
    assert_eq!(answers.len(), addrs.len(), "one answer line per query");
    let mut mismatches = Vec::new();
    for (&a, line) in addrs.iter().zip(&answers) {
        let mut words = line.split_whitespace();
        assert_eq!(
            words.next(),
            Some(Ipv4Addr::from(a).to_string().as_str()),
            "answer order: {line}"
        );
        let words: Vec<&str> = line.split_whitespace().collect();
        let kernel = match words.iter().position(|&w| w == "via") {
            Some(i) => words
                .get(i + 1)
                .and_then(|g| g.parse::<Ipv4Addr>().ok())
                .map(|g| u32::from(g.octets()[3])),
            None => words.contains(&"dev").then_some(0),
        };
        if kernel != fib.lookup(a) {
            mismatches.push(format!(
                "{}: kernel {line:?}, vrhost {:?}",
                Ipv4Addr::from(a),
                fib.lookup(a)
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} differ, e.g. {:?}",
        mismatches.len(),
        addrs.len(),
        &mismatches[..mismatches.len().min(5)]
    );
    eprintln!(
        "kernel_diff: {} addresses, {} routes: all equal",
        addrs.len(),
        fib.len()
    );
}
