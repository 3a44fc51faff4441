//! Routing policies: the three forwarding modes of the FPGA virtual-router paper (seed 003):
//! by destination (the default), by source, or by the (source, destination) pair, where the
//! longest matching *source* prefix selects a table and the longest matching *destination*
//! prefix selects the route in it.
//!
//! Semantics of [`RoutingMode::SrcDst`]: no fallback between tables. If the selected
//! source table has no route for the destination, the answer is "no route", as with a
//! missing route in a destination FIB. Add a `0/0` source table for a default.

use std::collections::HashMap;

use crate::{Fib, FibError, Key, NextHopId};

/// How a VR chooses a route; serialized as `"dst"`, `"src"` or `"src-dst"`. No config key
/// selects it yet: the built-in router looks up the destination in an [`crate::Ipv4Fib`], and
/// nothing outside this crate's tests builds a [`PolicyFib`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutingMode {
    /// Longest match on the destination address.
    #[default]
    Dst,
    /// Longest match on the source address.
    Src,
    /// Source prefix selects a table; destination prefix selects the route in it.
    SrcDst,
}

/// A FIB for one [`RoutingMode`].
#[derive(Debug)]
pub struct PolicyFib<K: Key> {
    mode: RoutingMode,
    /// `Dst` and `Src`: the one table. `SrcDst`: maps a source address to a table index.
    main: Fib<K>,
    /// `SrcDst`: one destination table per source prefix.
    tables: Vec<Fib<K>>,
    /// `SrcDst`: source prefix -> index in `tables`.
    by_src: HashMap<(K, u8), u32>,
}

impl<K: Key> PolicyFib<K> {
    /// An empty FIB for `mode`.
    pub fn new(mode: RoutingMode) -> Self {
        Self {
            mode,
            main: Fib::new(),
            tables: Vec::new(),
            by_src: HashMap::new(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> RoutingMode {
        self.mode
    }

    /// Add or replace a route. `Dst`: `dst/dst_len` (the source is ignored); `Src`:
    /// `src/src_len` (the destination is ignored); `SrcDst`: `dst/dst_len` in the table of
    /// `src/src_len`, created if needed. Returns the replaced next hop.
    ///
    /// # Errors
    /// As [`Fib::insert`].
    pub fn insert(
        &mut self,
        src: K,
        src_len: u8,
        dst: K,
        dst_len: u8,
        nh: NextHopId,
    ) -> Result<Option<NextHopId>, FibError> {
        match self.mode {
            RoutingMode::Dst => self.main.insert(dst, dst_len, nh),
            RoutingMode::Src => self.main.insert(src, src_len, nh),
            RoutingMode::SrcDst => {
                if src_len > K::BITS {
                    return Err(FibError::PrefixLength {
                        len: src_len,
                        max: K::BITS,
                    });
                }
                let key = (src.mask(src_len), src_len);
                let t = match self.by_src.get(&key) {
                    Some(&t) => t,
                    None => {
                        let t = self.tables.len() as u32;
                        // Fails only if t > MAX_NEXT_HOP: more tables than next hops.
                        self.main.insert(key.0, src_len, t)?;
                        self.tables.push(Fib::new());
                        self.by_src.insert(key, t);
                        t
                    }
                };
                self.tables[t as usize].insert(dst, dst_len, nh)
            }
        }
    }

    /// `SrcDst`: the table of source prefix `src/src_len`, if it has one.
    fn table_of(&self, src: K, src_len: u8) -> Option<usize> {
        let key = (src.mask(src_len.min(K::BITS)), src_len);
        self.by_src.get(&key).map(|&t| t as usize)
    }

    /// The route of exactly this prefix (arguments as for
    /// [`PolicyFib::insert`]), if any.
    pub fn get(&self, src: K, src_len: u8, dst: K, dst_len: u8) -> Option<NextHopId> {
        match self.mode {
            RoutingMode::Dst => self.main.get(dst, dst_len),
            RoutingMode::Src => self.main.get(src, src_len),
            RoutingMode::SrcDst => self.tables[self.table_of(src, src_len)?].get(dst, dst_len),
        }
    }

    /// Delete a route (arguments as for [`PolicyFib::insert`]). An emptied source table
    /// stays selected (and answers "no route") until its source prefix is given new routes.
    pub fn remove(&mut self, src: K, src_len: u8, dst: K, dst_len: u8) -> Option<NextHopId> {
        match self.mode {
            RoutingMode::Dst => self.main.remove(dst, dst_len),
            RoutingMode::Src => self.main.remove(src, src_len),
            RoutingMode::SrcDst => {
                let t = self.table_of(src, src_len)?;
                self.tables[t].remove(dst, dst_len)
            }
        }
    }

    /// The route for a packet from `src` to `dst`.
    #[inline]
    pub fn lookup(&self, src: K, dst: K) -> Option<NextHopId> {
        match self.mode {
            RoutingMode::Dst => self.main.lookup(dst),
            RoutingMode::Src => self.main.lookup(src),
            RoutingMode::SrcDst => self
                .tables
                .get(self.main.lookup(src)? as usize)?
                .lookup(dst),
        }
    }

    /// Batched [`PolicyFib::lookup`]; `Dst` and `Src` use the FIB's batched lookup.
    ///
    /// # Panics
    /// If the three slices differ in length.
    pub fn lookup_batch(&self, srcs: &[K], dsts: &[K], out: &mut [Option<NextHopId>]) {
        assert!(
            srcs.len() == dsts.len() && dsts.len() == out.len(),
            "lookup_batch: lengths differ"
        );
        match self.mode {
            RoutingMode::Dst => self.main.lookup_batch(dsts, out),
            RoutingMode::Src => self.main.lookup_batch(srcs, out),
            RoutingMode::SrcDst => {
                self.main.lookup_batch(srcs, out);
                for (o, &d) in out.iter_mut().zip(dsts) {
                    *o = o.and_then(|t| self.tables.get(t as usize)?.lookup(d));
                }
            }
        }
    }

    /// Routes in all tables.
    pub fn len(&self) -> usize {
        match self.mode {
            RoutingMode::SrcDst => self.tables.iter().map(Fib::len).sum(),
            _ => self.main.len(),
        }
    }

    /// True if no route.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of all tables.
    pub fn mem_bytes(&self) -> usize {
        self.main.mem_bytes() + self.tables.iter().map(Fib::mem_bytes).sum::<usize>()
    }
}
