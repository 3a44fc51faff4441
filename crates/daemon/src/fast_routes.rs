//! A VR's routes in the fast path's trie (its FIB): its route file's
//! (read once, kept while the file is unchanged) under its other routes,
//! written and removed by the many (`FastPath::add_routes`, all or
//! nothing).
//!
//! The routes the trie holds for a VR are two layers: the route file's
//! IPv4 routes ([`FileRoutes`], each to next hop `ASN mod
//! len(nexthops)`, as the router loads them) and on top of them
//! [`Desired::routes`] (connected subnets, config and API routes), which
//! wins for a prefix both have, except a config route, which the file's
//! replaces as in the router (it loads the file after `routes`).
//! [`changes`] compares two such states prefix by prefix, walking the
//! file's half million routes only when the file itself changed.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use vrhost_fast::{NextHop, RouteEntry};

use crate::fast::Desired;

/// Routes by (table, prefix, length).
pub type Routes = BTreeMap<(u32, Ipv4Addr, u8), NextHop>;

/// A route file's routes as the trie takes them, shared between what is
/// wanted and what was written while the file is unchanged.
pub type FileRoutes = Arc<Routes>;

/// What a VR's router config says of its route file: the path and the
/// next hop of each index (`ASN mod len` picks one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteFile {
    /// The file (absolute: the config made it so).
    pub path: String,
    /// The next hops, by index.
    pub hops: Vec<NextHop>,
}

/// A route file read: what it was read as, when, and its routes.
#[derive(Debug)]
struct Loaded {
    file: RouteFile,
    stamp: Stamp,
    routes: FileRoutes,
}

/// A file's modification time and size: a change of either reads it again.
type Stamp = (Option<SystemTime>, u64);

fn stamp(path: &str) -> Result<Stamp, String> {
    let m = std::fs::metadata(path).map_err(|e| format!("route_file {path}: {e}"))?;
    Ok((m.modified().ok(), m.len()))
}

/// The route files of the VRs the fast path carries, by VR.
#[derive(Debug, Default)]
pub struct RouteFiles {
    loaded: BTreeMap<String, Loaded>,
}

impl RouteFiles {
    /// VR `vr`'s routes of `file`: those read before if the file, its
    /// size and modification time, and the next hops are the same, else
    /// read now.
    ///
    /// # Errors
    /// The file does not read (gone, unreadable, not a route file).
    pub fn routes(&mut self, vr: &str, file: &RouteFile) -> Result<FileRoutes, String> {
        let now = stamp(&file.path)?;
        if let Some(l) = self.loaded.get(vr)
            && l.file == *file
            && l.stamp == now
        {
            return Ok(l.routes.clone());
        }
        let t = Instant::now();
        let path = std::path::Path::new(&file.path);
        let set = vrhost_fib::import::read_routes(path, &Default::default())
            .map_err(|e| format!("route_file {}: {e}", file.path))?;
        let n = file.hops.len() as u32;
        if n == 0 {
            return Err("route_file needs at least one next hop".into());
        }
        let routes: Routes = set
            .ipv4()
            .map(|r| {
                let hop = file.hops[(r.asn.unwrap_or(0) % n) as usize];
                ((0, Ipv4Addr::from(r.prefix), r.len), hop)
            })
            .collect();
        tracing::info!(
            vr,
            file = file.path,
            routes = routes.len(),
            ms = t.elapsed().as_millis() as u64,
            "fast path: route file read"
        );
        let routes = Arc::new(routes);
        let l = Loaded {
            file: file.clone(),
            stamp: now,
            routes: routes.clone(),
        };
        self.loaded.insert(vr.to_string(), l);
        Ok(routes)
    }

    /// Forget the files of VRs not in `keep`.
    pub fn retain(&mut self, keep: &dyn Fn(&str) -> bool) {
        self.loaded.retain(|vr, _| keep(vr));
    }
}

/// Whether two states have the same route file routes (the same read).
fn same_file(a: &Option<FileRoutes>, b: &Option<FileRoutes>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// What the trie holds for `key` in state `s`: its own route, else the
/// file's.
fn effective(s: &Desired, key: &(u32, Ipv4Addr, u8)) -> Option<NextHop> {
    (s.routes.get(key).copied()).or_else(|| s.file.as_ref()?.get(key).copied())
}

/// From state `old` (what the trie holds) to `new`: the routes to add or
/// replace, and the prefixes to remove.
pub fn changes(old: &Desired, new: &Desired) -> (Vec<RouteEntry>, Vec<(u32, Ipv4Addr, u8)>) {
    let (mut add, mut remove) = (Vec::new(), Vec::new());
    let mut visit = |k: &(u32, Ipv4Addr, u8)| match (effective(old, k), effective(new, k)) {
        (o, Some(n)) if o != Some(n) => add.push((*k, n)),
        (Some(_), None) => remove.push(*k),
        _ => {}
    };
    // Each key once: the layers in order, a key skipped where an earlier
    // layer has it.
    new.routes.keys().for_each(&mut visit);
    (old.routes.keys())
        .filter(|k| !new.routes.contains_key(k))
        .for_each(&mut visit);
    if !same_file(&old.file, &new.file) {
        let seen =
            |k: &(u32, Ipv4Addr, u8)| new.routes.contains_key(k) || old.routes.contains_key(k);
        let nf = new.file.as_deref();
        for k in nf.into_iter().flat_map(|f| f.keys()).filter(|k| !seen(k)) {
            visit(k);
        }
        let of = old.file.as_deref();
        for k in (of.into_iter().flat_map(|f| f.keys()))
            .filter(|k| !seen(k) && !nf.is_some_and(|f| f.contains_key(k)))
        {
            visit(k);
        }
    }
    (add, remove)
}

/// Every prefix state `s` has in the trie.
pub fn all_keys(s: &Desired) -> Vec<(u32, Ipv4Addr, u8)> {
    let file = s.file.as_deref().into_iter().flat_map(|f| f.keys());
    let mut keys: Vec<_> = s.routes.keys().chain(file).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Log a large write: how long the trie took.
pub fn log_write(vr: &str, routes: usize, t: Instant) {
    if routes >= 10_000 {
        tracing::info!(
            vr,
            routes,
            ms = t.elapsed().as_millis() as u64,
            "fast path: routes written"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gw(i: u8) -> NextHop {
        NextHop::Gateway(Ipv4Addr::new(10, 0, 0, i))
    }

    fn k(a: u8) -> (u32, Ipv4Addr, u8) {
        (0, Ipv4Addr::new(a, 0, 0, 0), 8)
    }

    fn state(routes: &[(u8, u8)], file: Option<&FileRoutes>) -> Desired {
        Desired {
            routes: routes.iter().map(|&(a, g)| (k(a), gw(g))).collect(),
            file: file.cloned(),
            ..Desired::default()
        }
    }

    #[test]
    fn the_file_is_under_the_other_routes_and_walked_only_when_it_changed() {
        let f1: FileRoutes = Arc::new([(k(1), gw(1)), (k(2), gw(1)), (k(3), gw(1))].into());
        let f2: FileRoutes = Arc::new([(k(2), gw(1)), (k(3), gw(2)), (k(4), gw(2))].into());
        let empty = Desired::default();
        let a = state(&[(2, 9)], Some(&f1));
        let (add, rm) = changes(&empty, &a);
        assert_eq!(add, [(k(2), gw(9)), (k(1), gw(1)), (k(3), gw(1))]);
        assert!(rm.is_empty());
        // The same read: an own route gone uncovers the file's.
        let b = state(&[(5, 5)], Some(&f1));
        let (add, rm) = changes(&a, &b);
        assert_eq!(add, [(k(5), gw(5)), (k(2), gw(1))]);
        assert!(rm.is_empty());
        // Another read: only what differs.
        let c = state(&[(5, 5)], Some(&f2));
        let (add, rm) = changes(&b, &c);
        assert_eq!(add, [(k(3), gw(2)), (k(4), gw(2))]);
        assert_eq!(rm, [k(1)]);
        // No file, no routes: everything out.
        let (add, mut rm) = changes(&c, &empty);
        assert!(add.is_empty());
        rm.sort_unstable();
        assert_eq!(rm, all_keys(&c));
        assert_eq!(all_keys(&c), [k(2), k(3), k(4), k(5)]);
    }
}
