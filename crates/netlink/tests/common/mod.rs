//! What the namespace tests share: a namespace with one veth pair
//! (deleted by `Netns`'s drop, also when a test fails), and a collector
//! that applies the watch's batches to a table.

#![allow(dead_code, reason = "each test file uses part of it")]

use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use vrhost_lab::Netns;
use vrhost_netlink::{NetnsRef, Route, RouteBatch, RouteWatch, WatchFilter, WatchOptions};

/// Whether the tests can make namespaces (root, `ip`).
pub fn can_run() -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("SKIPPED: namespace tests need root");
    }
    root
}

/// A namespace with `d0` (and its peer `d1`) up, 10.0.0.1/24 and 2001:db8::1/64 on it.
pub fn lab() -> Netns {
    let ns = Netns::unique("vrh-nl").expect("namespace");
    // A veth pair inside the namespace (this kernel has no dummy devices).
    ns.ip(&["link", "add", "d0", "type", "veth", "peer", "name", "d1"])
        .unwrap();
    ns.ip(&["link", "set", "d0", "up"]).unwrap();
    ns.ip(&["link", "set", "d1", "up"]).unwrap();
    ns.ip(&["addr", "add", "10.0.0.1/24", "dev", "d0"]).unwrap();
    ns.ip(&["-6", "addr", "add", "2001:db8::1/64", "dev", "d0", "nodad"])
        .unwrap();
    ns
}

/// Run `ip` in `ns` with `args` split at whitespace (`"route add 10.1.0.0/16 via
/// 10.0.0.2"`); panics if it fails.
pub fn run_ip(ns: &Netns, args: &str) {
    let args: Vec<&str> = args.split_whitespace().collect();
    ns.ip(&args).unwrap();
}

/// Run `ip -batch` in `ns` on `lines` (one `ip` command a line), through a
/// file named after the namespace and `tag`, removed before the result is
/// checked; panics if `ip` fails.
pub fn ip_batch(ns: &Netns, tag: &str, lines: impl IntoIterator<Item = String>) {
    let path = std::env::temp_dir().join(format!("{}{tag}.batch", ns.name()));
    let mut text = String::new();
    for l in lines {
        text.push_str(&l);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    let out = ns.ip(&["-batch", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    out.unwrap();
}

/// [`lab`], or `None` (the test skips) where [`can_run`] says no.
pub fn lab_if_root() -> Option<Netns> {
    can_run().then(lab)
}

/// The watch's batches, applied in order to a table of routes.
pub struct Collector {
    pub rx: Receiver<RouteBatch>,
    pub table: HashMap<IpNet, Route>,
    pub batches: Vec<RouteBatch>,
}

impl Collector {
    pub fn apply(&mut self, b: RouteBatch) {
        for p in &b.del {
            assert!(self.table.remove(p).is_some(), "delete of {p} not held");
        }
        for r in &b.add {
            self.table.insert(r.prefix, r.clone());
        }
        self.batches.push(b);
    }

    /// Apply batches until `done(table)` holds; panics after 10 s.
    pub fn until(&mut self, what: &str, done: impl Fn(&HashMap<IpNet, Route>) -> bool) {
        let end = Instant::now() + Duration::from_secs(10);
        while !done(&self.table) {
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(b) => self.apply(b),
                Err(_) => panic!(
                    "timed out waiting for {what}; table: {:?}",
                    self.table.keys()
                ),
            }
        }
    }

    /// Apply whatever arrives within `d`.
    pub fn settle(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while let Ok(b) = self
            .rx
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            self.apply(b);
        }
    }

    pub fn get(&self, p: &str) -> Option<&Route> {
        self.table.get(&p.parse::<IpNet>().unwrap())
    }
}

/// Start a watch on `ns`, waiting until its initial dump is handed on.
pub fn watch(ns: &Netns, filter: WatchFilter, options: WatchOptions) -> (RouteWatch, Collector) {
    let (w, rx) = RouteWatch::channel(NetnsRef::named(ns.name()), filter, options, 1024)
        .expect("watch starts");
    let mut c = Collector {
        rx,
        table: HashMap::new(),
        batches: Vec::new(),
    };
    let end = Instant::now() + Duration::from_secs(10);
    while !w.stats().synced {
        assert!(Instant::now() < end, "no initial dump: {:?}", w.stats());
        c.settle(Duration::from_millis(10));
    }
    c.settle(Duration::from_millis(10));
    (w, c)
}

/// [`watch`] with the default filter, handing batches on in windows of `window`.
pub fn watch_in_windows(ns: &Netns, window: Duration) -> (RouteWatch, Collector) {
    let options = WatchOptions {
        window,
        ..WatchOptions::default()
    };
    watch(ns, WatchFilter::default(), options)
}
