//! The kernel table as the watch knows it, and the changes not yet handed
//! on, turned into [`RouteBatch`]es.
//!
//! Per prefix the table keeps every kernel route taken (several may share
//! a prefix with different metrics; the lowest metric is the one in use,
//! as in the kernel) and the route last handed on. A change only marks
//! the prefix dirty; a flush compares, for each dirty prefix in the order
//! it was first touched, the route in use with the route handed on, and
//! emits the difference. So a route added and withdrawn within one window
//! yields nothing, a route replaced yields one add, and a re-dump after a
//! lost event (resync) yields exactly what changed.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use ipnet::IpNet;

use crate::Route;

/// Route changes for a VR: apply `del`, then `add`, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteBatch {
    /// Routes to add, or to replace if their prefix has one.
    pub add: Vec<Route>,
    /// Prefixes whose routes to delete. A prefix is never in both lists.
    pub del: Vec<IpNet>,
}

impl RouteBatch {
    /// Changes in the batch.
    pub fn len(&self) -> usize {
        self.add.len() + self.del.len()
    }

    /// No changes.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.del.is_empty()
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// Kernel routes of the prefix taken, at most one per metric.
    routes: Vec<Route>,
    /// The route handed on for the prefix.
    sent: Option<Route>,
    /// In `dirty`.
    dirty: bool,
}

impl Slot {
    fn best(&self) -> Option<&Route> {
        self.routes.iter().min_by_key(|r| r.metric)
    }
}

/// The table and its pending changes.
#[derive(Debug, Default)]
pub(crate) struct Table {
    slots: HashMap<IpNet, Slot>,
    dirty: VecDeque<IpNet>,
    /// Prefixes with at least one kernel route, kept up to date rather
    /// than counted (the watch reads it after every wake-up).
    held: usize,
}

impl Table {
    fn touch(&mut self, p: IpNet) -> &mut Slot {
        let s = self.slots.entry(p).or_default();
        if !s.dirty {
            s.dirty = true;
            self.dirty.push_back(p);
        }
        s
    }

    /// A kernel route added or replaced (the one of its prefix and metric).
    pub(crate) fn upsert(&mut self, r: Route) {
        let s = self.touch(r.prefix);
        let was_empty = s.routes.is_empty();
        match s.routes.iter_mut().find(|x| x.metric == r.metric) {
            Some(x) => *x = r,
            None => s.routes.push(r),
        }
        self.held += usize::from(was_empty);
    }

    /// A kernel route of `prefix` and `metric` deleted (or no longer
    /// taken: replaced by one the filter skips). Whether the table had it.
    pub(crate) fn remove(&mut self, prefix: IpNet, metric: u32) -> bool {
        let Entry::Occupied(mut e) = self.slots.entry(prefix) else {
            return false;
        };
        let s = e.get_mut();
        let Some(i) = s.routes.iter().position(|x| x.metric == metric) else {
            return false;
        };
        s.routes.swap_remove(i);
        self.held -= usize::from(s.routes.is_empty());
        if !s.dirty {
            s.dirty = true;
            self.dirty.push_back(prefix);
        }
        true
    }

    /// Forget every kernel route (before a re-dump refills the table),
    /// keeping what was handed on: every prefix becomes dirty.
    pub(crate) fn clear_for_resync(&mut self) {
        self.held = 0;
        for (p, s) in &mut self.slots {
            s.routes.clear();
            if !s.dirty {
                s.dirty = true;
                self.dirty.push_back(*p);
            }
        }
    }

    /// The kernel route of `prefix` and `metric` the table holds.
    pub(crate) fn get(&self, prefix: IpNet, metric: u32) -> Option<&Route> {
        self.slots
            .get(&prefix)?
            .routes
            .iter()
            .find(|r| r.metric == metric)
    }

    /// Prefixes changed since the last flush.
    pub(crate) fn dirty_len(&self) -> usize {
        self.dirty.len()
    }

    /// Routes in use (one per prefix).
    pub(crate) fn len(&self) -> usize {
        self.held
    }

    /// The next batch of at most `max` changes, or `None` when no dirty
    /// prefix changed what was handed on. `coalesced` counts dirty
    /// prefixes whose changes cancelled out.
    pub(crate) fn flush(&mut self, max: usize, coalesced: &mut u64) -> Option<RouteBatch> {
        let mut b = RouteBatch::default();
        while b.len() < max.max(1) {
            let Some(p) = self.dirty.pop_front() else {
                break;
            };
            let Entry::Occupied(mut e) = self.slots.entry(p) else {
                continue;
            };
            let s = e.get_mut();
            s.dirty = false;
            let best = s.best().cloned();
            if best == s.sent {
                *coalesced += 1;
            } else if let Some(r) = best {
                s.sent = Some(r.clone());
                b.add.push(r);
            } else {
                s.sent = None;
                b.del.push(p);
            }
            if s.routes.is_empty() && s.sent.is_none() {
                e.remove();
            }
        }
        (!b.is_empty()).then_some(b)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use proptest::prelude::*;

    use super::*;
    use crate::RouteKind;

    fn r(p: &str, via: &str, metric: u32) -> Route {
        Route {
            prefix: p.parse().unwrap(),
            kind: RouteKind::Unicast,
            via: Some(via.parse::<IpAddr>().unwrap()),
            oif: None,
            protocol: 12,
            metric,
            dropped_nexthops: 0,
        }
    }

    fn flush_all(t: &mut Table) -> (Vec<RouteBatch>, u64) {
        let mut c = 0;
        let mut v = Vec::new();
        while let Some(b) = t.flush(100, &mut c) {
            v.push(b);
        }
        (v, c)
    }

    #[test]
    fn added_then_withdrawn_in_one_window_yields_nothing() {
        let mut t = Table::default();
        t.upsert(r("10.1.0.0/16", "10.0.0.2", 0));
        assert!(t.remove("10.1.0.0/16".parse().unwrap(), 0));
        let (b, c) = flush_all(&mut t);
        assert!(b.is_empty(), "{b:?}");
        assert_eq!((c, t.len()), (1, 0));
        assert!(t.slots.is_empty(), "no slot left behind");
    }

    #[test]
    fn a_replace_is_one_add_and_a_withdrawal_after_a_flush_is_a_del() {
        let mut t = Table::default();
        t.upsert(r("10.1.0.0/16", "10.0.0.2", 0));
        let (b, _) = flush_all(&mut t);
        assert_eq!(b[0].add.len(), 1);
        t.upsert(r("10.1.0.0/16", "10.0.0.3", 0));
        t.upsert(r("10.1.0.0/16", "10.0.0.4", 0));
        let (b, _) = flush_all(&mut t);
        assert_eq!(
            b,
            vec![RouteBatch {
                add: vec![r("10.1.0.0/16", "10.0.0.4", 0)],
                del: vec![]
            }]
        );
        assert!(t.remove("10.1.0.0/16".parse().unwrap(), 0));
        let (b, _) = flush_all(&mut t);
        assert_eq!(b[0].del, vec!["10.1.0.0/16".parse::<IpNet>().unwrap()]);
    }

    #[test]
    fn the_lowest_metric_wins_and_its_withdrawal_falls_back() {
        let mut t = Table::default();
        t.upsert(r("10.1.0.0/16", "10.0.0.9", 200));
        t.upsert(r("10.1.0.0/16", "10.0.0.2", 100));
        let (b, _) = flush_all(&mut t);
        assert_eq!(b[0].add, vec![r("10.1.0.0/16", "10.0.0.2", 100)]);
        t.remove("10.1.0.0/16".parse().unwrap(), 100);
        let (b, _) = flush_all(&mut t);
        assert_eq!(b[0].add, vec![r("10.1.0.0/16", "10.0.0.9", 200)]);
        assert!(
            !t.remove("10.1.0.0/16".parse().unwrap(), 7),
            "no such metric"
        );
    }

    #[test]
    fn batches_hold_at_most_max_changes_in_first_touched_order() {
        let mut t = Table::default();
        for i in 0..250u32 {
            t.upsert(r(
                &format!("10.{}.{}.0/24", i / 256, i % 256),
                "10.0.0.2",
                0,
            ));
        }
        let mut c = 0;
        let sizes: Vec<usize> =
            std::iter::from_fn(|| t.flush(100, &mut c).map(|b| b.len())).collect();
        assert_eq!(sizes, vec![100, 100, 50]);
    }

    #[test]
    fn a_resync_emits_only_what_changed() {
        let mut t = Table::default();
        t.upsert(r("10.1.0.0/16", "10.0.0.2", 0));
        t.upsert(r("10.2.0.0/16", "10.0.0.2", 0));
        flush_all(&mut t);
        t.clear_for_resync();
        // The re-dump: 10.1 unchanged, 10.2 gone, 10.3 new.
        t.upsert(r("10.1.0.0/16", "10.0.0.2", 0));
        t.upsert(r("10.3.0.0/16", "10.0.0.2", 0));
        let (b, c) = flush_all(&mut t);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].add, vec![r("10.3.0.0/16", "10.0.0.2", 0)]);
        assert_eq!(b[0].del, vec!["10.2.0.0/16".parse::<IpNet>().unwrap()]);
        assert_eq!((c, t.len()), (1, 2));
    }

    proptest! {
        /// Whatever the kernel does and whenever batches are cut, the
        /// batches applied in order give the kernel's table: per prefix,
        /// the route of the lowest metric.
        #[test]
        fn batches_applied_in_order_give_the_kernel_table(
            ops in proptest::collection::vec((0u8..3, 0u8..8, 0u32..3, 0u8..4, 1usize..6), 1..200)
        ) {
            let mut t = Table::default();
            let mut kernel: HashMap<(IpNet, u32), Route> = HashMap::new();
            let mut vr: HashMap<IpNet, Route> = HashMap::new();
            let mut c = 0;
            for (op, p, metric, via, max) in ops {
                let prefix = format!("10.{p}.0.0/16");
                match op {
                    0 => {
                        let rt = r(&prefix, &format!("10.0.0.{via}"), metric);
                        kernel.insert((rt.prefix, metric), rt.clone());
                        t.upsert(rt);
                    }
                    1 => {
                        let pn: IpNet = prefix.parse().unwrap();
                        let had = kernel.remove(&(pn, metric)).is_some();
                        prop_assert_eq!(t.remove(pn, metric), had);
                    }
                    _ => {
                        if let Some(b) = t.flush(max, &mut c) {
                            prop_assert!(b.len() <= max);
                            for d in &b.del {
                                prop_assert!(vr.remove(d).is_some());
                            }
                            for a in b.add {
                                vr.insert(a.prefix, a);
                            }
                        }
                    }
                }
            }
            while let Some(b) = t.flush(3, &mut c) {
                for d in &b.del {
                    prop_assert!(vr.remove(d).is_some());
                }
                for a in b.add {
                    vr.insert(a.prefix, a);
                }
            }
            let mut want: HashMap<IpNet, Route> = HashMap::new();
            for ((p, _), rt) in &kernel {
                if want.get(p).is_none_or(|w| rt.metric < w.metric) {
                    want.insert(*p, rt.clone());
                }
            }
            prop_assert_eq!(t.len(), want.len());
            prop_assert_eq!(vr, want);
        }
    }
}
