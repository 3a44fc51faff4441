//! Routes by the many: a VR's whole table (a route file's 512K prefixes)
//! written to the `routes` trie with batch updates ([`crate::batch`]),
//! entry by entry where the kernel has no batch operation for the trie.

use std::net::Ipv4Addr;
use std::os::fd::AsFd;

use aya::maps::IterableMap;
use aya::maps::lpm_trie::Key as LpmKey;

use crate::{FastError, FastPath, NextHop, ROUTES, abi, batch, lpm_key, map_err, removed};

/// Routes per batch call: the keys and values of one call are copied
/// into the kernel (16 and 8 bytes each), so this bounds that copy.
pub const ROUTE_BATCH: usize = 16_384;

/// A route for [`FastPath::add_routes`]: (table, prefix, length) and its
/// next hop.
pub type RouteEntry = ((u32, Ipv4Addr, u8), NextHop);

/// The trie's value for next hop `hop`.
pub(crate) fn route_value(hop: NextHop) -> abi::RouteValue {
    match hop {
        NextHop::Gateway(ip) => abi::RouteValue {
            gateway: ip.octets(),
            flags: 0,
        },
        NextHop::Connected => abi::RouteValue {
            gateway: [0; 4],
            flags: abi::ROUTE_CONNECTED,
        },
    }
}

/// Whether a batch call's error means the trie is full.
fn full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::E2BIG | libc::ENOSPC))
}

const FULL: FastError = FastError::Config {
    why: "routes: the trie is full (raise host.fast.max_routes)",
};

impl FastPath {
    /// Add or replace routes of VR `vr` (each as [`FastPath::add_route`]
    /// takes it), [`ROUTE_BATCH`] per `BPF_MAP_UPDATE_BATCH` call.
    /// Returns whether the kernel took them by the batch (else they went
    /// one update each).
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`] (nothing written
    /// then), [`FastError::Config`] (the trie is full: the routes before
    /// stay), [`FastError::Os`] or [`FastError::Map`].
    pub fn add_routes(&mut self, vr: u32, routes: &[RouteEntry]) -> Result<bool, FastError> {
        self.check_vr(vr)?;
        let mut keys = Vec::with_capacity(routes.len().min(ROUTE_BATCH));
        let mut values = Vec::with_capacity(keys.capacity());
        let mut batched = true;
        for chunk in routes.chunks(ROUTE_BATCH) {
            keys.clear();
            values.clear();
            for &((t, p, l), hop) in chunk {
                keys.push(lpm_key(vr, t, p, l)?);
                values.push(route_value(hop));
            }
            let mut at = 0;
            if batched {
                let fd = self.routes.map().fd().as_fd();
                let done = batch::update(fd, &keys, &values);
                match done.err {
                    None => continue,
                    Some(e) if full(&e) => return Err(FULL),
                    Some(e) if done.count == 0 && batch::unsupported(&e) => batched = false,
                    Some(source) => {
                        return Err(FastError::Os {
                            call: "bpf(BPF_MAP_UPDATE_BATCH) routes",
                            source,
                        });
                    }
                }
                at = done.count;
            }
            for (k, v) in keys[at..].iter().zip(&values[at..]) {
                self.routes
                    .insert(k, *v, 0)
                    .map_err(map_err(ROUTES, "insert"))?;
            }
        }
        Ok(batched)
    }

    /// Remove routes of VR `vr` by (table, prefix, length), those absent
    /// skipped, [`ROUTE_BATCH`] per `BPF_MAP_DELETE_BATCH` call (one
    /// delete each where the kernel has no batch operation). Returns how
    /// many were there.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`], [`FastError::Os`]
    /// or [`FastError::Map`].
    pub fn remove_routes(
        &mut self,
        vr: u32,
        keys: &[(u32, Ipv4Addr, u8)],
    ) -> Result<usize, FastError> {
        self.check_vr(vr)?;
        let mut n = 0;
        for chunk in keys.chunks(ROUTE_BATCH) {
            let keys = (chunk.iter())
                .map(|&(t, p, l)| lpm_key(vr, t, p, l))
                .collect::<Result<Vec<_>, _>>()?;
            n += self.delete_keys(&keys)?;
        }
        Ok(n)
    }

    /// Delete `keys` from the trie, by the batch while the kernel takes
    /// it, stepping over each absent key; how many were there.
    fn delete_keys(&mut self, keys: &[LpmKey<abi::LpmData>]) -> Result<usize, FastError> {
        let (mut at, mut n) = (0, 0);
        while at < keys.len() {
            let fd = self.routes.map().fd().as_fd();
            let done = batch::delete(fd, &keys[at..]);
            at += done.count;
            n += done.count;
            match done.err {
                None => {}
                // Stopped at a key that is not there: step over it.
                Some(e) if e.raw_os_error() == Some(libc::ENOENT) => at += 1,
                Some(e) if done.count == 0 && batch::unsupported(&e) => {
                    for k in &keys[at..] {
                        n += usize::from(removed(self.routes.remove(k), ROUTES, "remove")?);
                    }
                    return Ok(n);
                }
                Some(source) => {
                    return Err(FastError::Os {
                        call: "bpf(BPF_MAP_DELETE_BATCH) routes",
                        source,
                    });
                }
            }
        }
        Ok(n)
    }
}
