//! The fast path's IPv4 routes: `vrhost_fib`'s DIR-16-8-8 trie (its
//! update algorithm, [`vrhost_fib::Prefixes`]) written into BPF array maps
//! that `xdp_router.c`'s `fib_lookup` reads.
//!
//! - `fib_root` (mmapable): a root of 65,536 entries per table slot; each
//!   {VR, table} with routes (or a source prefix selecting it) holds a
//!   slot, up to `max_route_tables`;
//! - `fib_groups` (mmapable): the groups of 256 entries of every table,
//!   `max_route_groups` of them (a full table takes about 22K);
//! - `fib_hops`: next hop id -> [`abi::RouteValue`]; equal next hops share
//!   an id (counted), up to `max_route_hops`;
//! - `vrs`' `table` field: VR -> 1 + the slot of its table 0 (dst and
//!   src modes; [`crate::vrconf`], where it was the array `fib_vrs`).
//!
//! Both mmapable arrays are written through this process's mapping of them
//! ([`Mapped`]) with the trie's publish order, so a route change is a few
//! 32-bit stores and a whole table goes in at memory speed, with no system
//! call per route. A group, table slot or next hop id given up by a delete
//! is reused only [`QUIET`] later, when no program run that could have
//! read it is still going (an XDP run takes microseconds).
//!
//! Capacity is fixed when the program is loaded; a write that does not
//! fit fails with an error naming the config key, and
//! [`crate::FastPath::add_routes`] then takes back what it wrote.

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use aya::Ebpf;
use aya::maps::{Array, Map, MapData};
use vrhost_fib::{Arrays, FibError, Prefixes, ROOT_BITS};

use crate::mapped::Mapped;
use crate::vrconf::Vrs;
use crate::{FastConfig, FastError, NextHop, abi, map_err};

pub(crate) const FIB_ROOT: &str = "fib_root";
pub(crate) const FIB_GROUPS: &str = "fib_groups";
pub(crate) const FIB_HOPS: &str = "fib_hops";

/// Entries of a table's root.
pub(crate) const ROOT_ENTRIES: u32 = 1 << ROOT_BITS;
/// Entries of a group (IPv4's stride: 8 bits).
pub(crate) const GROUP_ENTRIES: u32 = 256;
/// The most table slots (a root index must fit in 31 bits).
pub(crate) const MAX_TABLES: u32 = 1 << 15;
/// The most groups (a group index must fit in an entry's 23 low bits).
pub(crate) const MAX_GROUPS: u32 = 1 << 23;

/// How long a group, slot or next hop id given up waits before reuse.
pub(crate) const QUIET: Duration = Duration::from_millis(50);

const FULL_GROUPS: FastError = FastError::Config {
    why: "routes: the route groups are full (raise host.fast.max_route_groups)",
};
const FULL_TABLES: FastError = FastError::Config {
    why: "routes: every route table slot is taken (raise host.fast.max_route_tables)",
};
const FULL_HOPS: FastError = FastError::Config {
    why: "routes: too many distinct next hops (max_route_hops)",
};
const FULL_ROUTES: FastError = FastError::Config {
    why: "routes: the trie is full (raise host.fast.max_routes)",
};

/// Ids given up, and when: free for reuse [`QUIET`] later.
#[derive(Default)]
struct Ids {
    /// Never handed out yet: `next..cap`.
    next: u32,
    cap: u32,
    free: Vec<u32>,
    waiting: VecDeque<(Instant, u32)>,
}

impl Ids {
    fn new(cap: u32) -> Self {
        Ids {
            cap,
            ..Ids::default()
        }
    }

    fn ripen(&mut self) {
        while let Some(&(t, id)) = self.waiting.front() {
            if t.elapsed() < QUIET {
                break;
            }
            self.free.push(id);
            self.waiting.pop_front();
        }
    }

    /// Whether `n` ids can be taken, waiting for given-up ones if that
    /// is what it takes.
    fn room(&mut self, n: usize) -> bool {
        let avail = |s: &Self| s.free.len() + (s.cap - s.next) as usize;
        self.ripen();
        if avail(self) >= n {
            return true;
        }
        if avail(self) + self.waiting.len() < n {
            return false;
        }
        std::thread::sleep(QUIET);
        self.ripen();
        avail(self) >= n
    }

    fn take(&mut self) -> Option<u32> {
        if self.free.is_empty() && self.next == self.cap {
            self.ripen();
        }
        match self.free.pop() {
            Some(id) => Some(id),
            None if self.next < self.cap => {
                self.next += 1;
                Some(self.next - 1)
            }
            None => None,
        }
    }

    fn give_up(&mut self, id: u32) {
        self.waiting.push_back((Instant::now(), id));
    }

    fn used(&self) -> usize {
        self.next as usize - self.free.len() - self.waiting.len()
    }
}

/// One table's root and the shared pool, as the trie's algorithm writes
/// them.
struct Slot<'a> {
    root: &'a [AtomicU32],
    pool: &'a [AtomicU32],
    groups: &'a mut Ids,
}

impl Arrays for Slot<'_> {
    fn root(&self) -> &[AtomicU32] {
        self.root
    }

    fn pool(&self) -> &[AtomicU32] {
        self.pool
    }

    fn reserve(&mut self, n: usize) -> Result<(), FibError> {
        if self.groups.room(n) {
            Ok(())
        } else {
            Err(FibError::Capacity {
                groups: self.groups.used(),
            })
        }
    }

    fn alloc(&mut self) -> u32 {
        self.groups
            .take()
            .expect("reserve() made room for the groups an update takes")
    }

    fn release(&mut self, g: u32) {
        self.groups.give_up(g);
    }
}

/// A table: its slot, its routes, the source prefixes selecting it.
struct Table {
    slot: u32,
    prefixes: Prefixes<u32>,
    sources: u32,
}

/// The FIB's maps and what user space keeps to update them.
pub(crate) struct Fib {
    root: Mapped,
    pool: Mapped,
    hops: Array<MapData, abi::RouteValue>,
    /// `vrs`, whose `table` fields are this one's.
    vrs: Arc<Vrs>,
    tables: HashMap<(u32, u32), Table>,
    slots: Ids,
    groups: Ids,
    /// Next hop ids by value, with the routes using each.
    hop_ids: HashMap<NextHop, (u32, u32)>,
    hop_values: HashMap<u32, NextHop>,
    hop_slots: Ids,
    routes: usize,
    max_routes: usize,
    // The maps behind the mappings (the mappings hold them too).
    _maps: [MapData; 2],
}

pub(crate) fn take_array(ebpf: &mut Ebpf, name: &'static str) -> Result<MapData, FastError> {
    match ebpf.take_map(name) {
        Some(Map::Array(m)) => Ok(m),
        _ => Err(map_err(name, "open")(aya::maps::MapError::InvalidName {
            name: name.into(),
        })),
    }
}

fn mapped(m: &MapData, name: &'static str, len: u32) -> Result<Mapped, FastError> {
    Mapped::new(m.fd().as_fd(), len as usize).map_err(|source| FastError::Os {
        call: if name == FIB_ROOT {
            "mmap fib_root"
        } else {
            "mmap fib_groups"
        },
        source,
    })
}

impl Fib {
    /// The arrays' sizes, as the loader sets them.
    pub(crate) fn sizes(cfg: &FastConfig) -> [(&'static str, u32); 3] {
        [
            // Values of 256 entries (`struct fib_group`).
            (
                FIB_ROOT,
                cfg.max_route_tables
                    .saturating_mul(ROOT_ENTRIES / GROUP_ENTRIES),
            ),
            (FIB_GROUPS, cfg.max_route_groups),
            (FIB_HOPS, cfg.max_route_hops),
        ]
    }

    /// Whether the sizes fit the entry encoding.
    pub(crate) fn check(cfg: &FastConfig) -> Result<(), FastError> {
        if cfg.max_route_tables == 0 || cfg.max_route_tables > MAX_TABLES {
            return Err(FastError::Config {
                why: "max_route_tables must be 1..=32768",
            });
        }
        if cfg.max_route_groups == 0 || cfg.max_route_groups > MAX_GROUPS {
            return Err(FastError::Config {
                why: "max_route_groups must be 1..=8388608",
            });
        }
        if cfg.max_route_hops == 0 || cfg.max_route_hops > vrhost_fib::MAX_NEXT_HOP + 1 {
            return Err(FastError::Config {
                why: "max_route_hops must be 1..=8388608",
            });
        }
        Ok(())
    }

    pub(crate) fn load(ebpf: &mut Ebpf, cfg: &FastConfig, vrs: Arc<Vrs>) -> Result<Fib, FastError> {
        let root_map = take_array(ebpf, FIB_ROOT)?;
        let pool_map = take_array(ebpf, FIB_GROUPS)?;
        let root = mapped(&root_map, FIB_ROOT, cfg.max_route_tables * ROOT_ENTRIES)?;
        let pool = mapped(&pool_map, FIB_GROUPS, cfg.max_route_groups * GROUP_ENTRIES)?;
        Ok(Fib {
            root,
            pool,
            hops: crate::take(ebpf, FIB_HOPS)?,
            vrs,
            tables: HashMap::new(),
            slots: Ids::new(cfg.max_route_tables),
            groups: Ids::new(cfg.max_route_groups),
            hop_ids: HashMap::new(),
            hop_values: HashMap::new(),
            hop_slots: Ids::new(cfg.max_route_hops),
            routes: 0,
            max_routes: cfg.max_routes as usize,
            _maps: [root_map, pool_map],
        })
    }

    /// Routes of every table.
    pub(crate) fn routes(&self) -> usize {
        self.routes
    }

    /// Groups in use.
    pub(crate) fn groups_used(&self) -> usize {
        self.groups.used()
    }

    /// The slot of {vr, table}, given one (empty) if it has none.
    fn table(&mut self, vr: u32, table: u32) -> Result<&mut Table, FastError> {
        if !self.tables.contains_key(&(vr, table)) {
            let slot = self.slots.take().ok_or(FULL_TABLES)?;
            if table == 0 {
                // The root is all zero (a slot is emptied before it is
                // given up): the VR sees no route until one is written.
                self.vrs.set_table(vr, slot + 1)?;
            }
            let t = Table {
                slot,
                prefixes: Prefixes::new(),
                sources: 0,
            };
            self.tables.insert((vr, table), t);
        }
        Ok(self.tables.get_mut(&(vr, table)).expect("inserted above"))
    }

    /// Give {vr, table}'s slot up if nothing uses it any more.
    fn maybe_free(&mut self, vr: u32, table: u32) -> Result<(), FastError> {
        let Some(t) = self.tables.get(&(vr, table)) else {
            return Ok(());
        };
        if !t.prefixes.is_empty() || t.sources > 0 {
            return Ok(());
        }
        let slot = t.slot;
        if table == 0 {
            self.vrs.set_table(vr, 0)?;
        }
        self.tables.remove(&(vr, table));
        self.slots.give_up(slot);
        Ok(())
    }

    /// The id of next hop `hop`, one more route using it.
    fn hold_hop(&mut self, hop: NextHop) -> Result<u32, FastError> {
        if let Some((id, n)) = self.hop_ids.get_mut(&hop) {
            *n += 1;
            return Ok(*id);
        }
        // An id given up moments ago (a replaced route's, which taking the
        // replace back wants again) is waited for rather than refused.
        if !self.hop_slots.room(1) {
            return Err(FULL_HOPS);
        }
        let id = self.hop_slots.take().ok_or(FULL_HOPS)?;
        self.hops
            .set(id, crate::routes::route_value(hop), 0)
            .map_err(map_err(FIB_HOPS, "set"))?;
        self.hop_ids.insert(hop, (id, 1));
        self.hop_values.insert(id, hop);
        Ok(id)
    }

    /// One route fewer using next hop id `id`.
    fn drop_hop(&mut self, id: u32) {
        let Some(hop) = self.hop_values.get(&id).copied() else {
            return;
        };
        if let Some((_, n)) = self.hop_ids.get_mut(&hop) {
            *n -= 1;
            if *n == 0 {
                self.hop_ids.remove(&hop);
                self.hop_values.remove(&id);
                self.hop_slots.give_up(id);
            }
        }
    }

    /// Add or replace route `prefix` -> `hop` of {vr, table}; the next hop
    /// it replaced. On an error nothing is changed.
    pub(crate) fn insert(
        &mut self,
        vr: u32,
        table: u32,
        prefix: (Ipv4Addr, u8),
        hop: NextHop,
    ) -> Result<Option<NextHop>, FastError> {
        let (p, len) = (u32::from(prefix.0), prefix.1);
        if len > 32 {
            return Err(FastError::PrefixLen { len });
        }
        let exists =
            (self.tables.get(&(vr, table))).is_some_and(|t| t.prefixes.get(p, len).is_some());
        if !exists && self.routes >= self.max_routes {
            return Err(FULL_ROUTES);
        }
        let id = self.hold_hop(hop)?;
        let r = self.table(vr, table).map(|t| t.slot);
        let written = r.and_then(|slot| {
            let base = (slot * ROOT_ENTRIES) as usize;
            let mut arrays = Slot {
                root: &self.root.values()[base..base + ROOT_ENTRIES as usize],
                pool: self.pool.values(),
                groups: &mut self.groups,
            };
            let t = self.tables.get_mut(&(vr, table)).expect("made above");
            t.prefixes
                .insert(&mut arrays, p, len, id)
                .map_err(|e| match e {
                    FibError::PrefixLength { len, .. } => FastError::PrefixLen { len },
                    _ => FULL_GROUPS,
                })
        });
        match written {
            Ok(old) => {
                let old_hop = old.and_then(|o| self.hop_values.get(&o).copied());
                match old {
                    Some(o) => self.drop_hop(o),
                    None => self.routes += 1,
                }
                Ok(old_hop)
            }
            Err(e) => {
                self.drop_hop(id);
                self.maybe_free(vr, table)?;
                Err(e)
            }
        }
    }

    /// Remove route `prefix` of {vr, table}; its next hop, if it was
    /// there.
    pub(crate) fn remove(
        &mut self,
        vr: u32,
        table: u32,
        prefix: (Ipv4Addr, u8),
    ) -> Result<Option<NextHop>, FastError> {
        if prefix.1 > 32 {
            return Err(FastError::PrefixLen { len: prefix.1 });
        }
        let Some(t) = self.tables.get_mut(&(vr, table)) else {
            return Ok(None);
        };
        let base = (t.slot * ROOT_ENTRIES) as usize;
        let mut arrays = Slot {
            root: &self.root.values()[base..base + ROOT_ENTRIES as usize],
            pool: self.pool.values(),
            groups: &mut self.groups,
        };
        let Some(id) = t
            .prefixes
            .remove(&mut arrays, u32::from(prefix.0), prefix.1)
        else {
            return Ok(None);
        };
        let hop = self.hop_values.get(&id).copied();
        self.routes -= 1;
        self.drop_hop(id);
        self.maybe_free(vr, table)?;
        Ok(hop)
    }

    /// A source prefix selects {vr, table}: its slot (given one if needed).
    pub(crate) fn hold_table(&mut self, vr: u32, table: u32) -> Result<u32, FastError> {
        let t = self.table(vr, table)?;
        t.sources += 1;
        Ok(t.slot)
    }

    /// A source prefix no longer selects {vr, table}.
    pub(crate) fn drop_table(&mut self, vr: u32, table: u32) -> Result<(), FastError> {
        if let Some(t) = self.tables.get_mut(&(vr, table)) {
            t.sources = t.sources.saturating_sub(1);
        }
        self.maybe_free(vr, table)
    }
}
