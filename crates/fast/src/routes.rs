//! Routes by the many: a VR's whole table (a route file's 512K prefixes)
//! written to the FIB's arrays ([`crate::fib`]) in one call, all or
//! nothing.

use std::net::Ipv4Addr;

use crate::{FastError, FastPath, NextHop, abi};

/// A route for [`FastPath::add_routes`]: (table, prefix, length) and its
/// next hop.
pub type RouteEntry = ((u32, Ipv4Addr, u8), NextHop);

/// The `fib_hops` value of next hop `hop`.
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

impl FastPath {
    /// Add or replace routes of VR `vr` (each as [`FastPath::add_route`]
    /// takes it): stores into the mapped FIB arrays, no system call per
    /// route. All or nothing: if one does not fit, those written before
    /// it in this call are taken back (removed, or their old next hop put
    /// back) and the error returned.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`] (nothing written
    /// then), [`FastError::Config`] (full: `max_routes`,
    /// `max_route_groups`, `max_route_tables` or `max_route_hops`; the
    /// routes before this call stay), [`FastError::Map`];
    /// [`FastError::Undo`] when taking back failed too (the VR's routes
    /// are then partly those of this call).
    pub fn add_routes(&mut self, vr: u32, routes: &[RouteEntry]) -> Result<(), FastError> {
        self.check_vr(vr)?;
        if let Some(&((_, _, len), _)) = routes.iter().find(|((_, _, l), _)| *l > 32) {
            return Err(FastError::PrefixLen { len });
        }
        let mut undo: Vec<(u32, (Ipv4Addr, u8), Option<NextHop>)> = Vec::new();
        for &((t, p, l), hop) in routes {
            match self.fib.insert(vr, t, (p, l), hop) {
                Ok(old) => undo.push((t, (p, l), old)),
                Err(e) => return Err(self.take_back(vr, undo, e)),
            }
        }
        Ok(())
    }

    /// Take back the routes `add_routes` wrote before `cause` stopped it,
    /// backwards (a route given twice ends as it was): each removed, or
    /// its old next hop put back. That needs no new group (a removal frees
    /// them, a replace takes none) and no new next hop id beyond those the
    /// call gave up (waited for until reusable), so it fails only if a map
    /// write does: it goes on through the rest, and the error returned then
    /// says so ([`FastError::Undo`]), the VR's table being partly new.
    fn take_back(
        &mut self,
        vr: u32,
        undo: Vec<(u32, (Ipv4Addr, u8), Option<NextHop>)>,
        cause: FastError,
    ) -> FastError {
        let mut failed = 0;
        let mut first = None;
        for (t, p, old) in undo.into_iter().rev() {
            let r = match old {
                None => self.fib.remove(vr, t, p).map(drop),
                Some(h) => self.fib.insert(vr, t, p, h).map(drop),
            };
            if let Err(e) = r {
                failed += 1;
                first.get_or_insert(e);
            }
        }
        match first {
            None => cause,
            Some(undo) => FastError::Undo {
                cause: Box::new(cause),
                failed,
                undo: Box::new(undo),
            },
        }
    }

    /// Remove routes of VR `vr` by (table, prefix, length), those absent
    /// skipped. Returns how many were there.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`] (nothing removed
    /// then), [`FastError::Map`].
    pub fn remove_routes(
        &mut self,
        vr: u32,
        keys: &[(u32, Ipv4Addr, u8)],
    ) -> Result<usize, FastError> {
        self.check_vr(vr)?;
        if let Some(&(_, _, len)) = keys.iter().find(|(_, _, l)| *l > 32) {
            return Err(FastError::PrefixLen { len });
        }
        let mut n = 0;
        for &(t, p, l) in keys {
            n += usize::from(self.fib.remove(vr, t, (p, l))?.is_some());
        }
        Ok(n)
    }

    /// Routes of all VRs in the fast path's FIB, and the FIB's groups in
    /// use (1 KiB each; `max_route_groups`).
    pub fn route_count(&self) -> (usize, usize) {
        (self.fib.routes(), self.fib.groups_used())
    }
}
