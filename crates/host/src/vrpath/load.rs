//! Load sampling: the VR's arrival rate, and each instance's rx ring fill
//! and measured capacity, which the weighted balancing policy is told.

use std::time::Instant;

use vrhost_shm::RingId;

use super::{BURST, VrPath};
use crate::balance::Policy;

/// The load estimates of a VR and its instances (see
/// [`VrStats::arrival_pps`]), kept between samples.
pub(super) struct Load {
    pub(super) at: Instant,
    pub(super) offered: u64,
    pub(super) arrival: f64,
    pub(super) returned: Vec<u64>,
    pub(super) held: Vec<u32>,
    pub(super) fill: Vec<f64>,
    pub(super) capacity: Vec<f64>,
    /// What the weighted policy is told: the capacity, or more while an
    /// instance has no backlog to measure it by (it is then probed up).
    pub(super) weight: Vec<f64>,
}

impl Load {
    pub(super) fn new(instances: usize) -> Self {
        Self {
            at: Instant::now(),
            offered: 0,
            arrival: 0.0,
            returned: vec![0; instances],
            held: vec![0; instances],
            fill: vec![0.0; instances],
            capacity: vec![0.0; instances],
            weight: vec![0.0; instances],
        }
    }
}

/// An instance holding at least this many slots at two samples in a row
/// was busy all along: what it handed back meanwhile is its capacity.
pub(super) const BACKLOGGED: u32 = BURST as u32;

impl VrPath {
    /// Update the load estimates: the VR's arrival rate, and each
    /// instance's rx ring fill and capacity (told to the weighted policy).
    pub(super) fn sample_load(&mut self, now: Instant) {
        let dt = now
            .saturating_duration_since(self.cold.load.at)
            .as_secs_f64();
        if dt < 0.001 {
            return;
        }
        let a = 1.0 - (-dt / crate::stats::LOAD_TAU.as_secs_f64()).exp();
        let l = &mut self.cold.load;
        l.at = now;
        let offered = self.stats.rx_packets.get() + self.stats.ingress_drops_total();
        let rate = offered.wrapping_sub(l.offered) as f64 / dt;
        l.offered = offered;
        l.arrival += a * (rate - l.arrival);
        self.stats.arrival_pps.set(l.arrival as u64);
        let vnics = self.vnic_port.len() as u16;
        let weighted = self.balancer.policy() == Policy::Weighted;
        let top = l.capacity.iter().copied().fold(0.0, f64::max);
        for (i, c) in self.stats.instances.iter().enumerate() {
            let held = self.slots.held()[i];
            c.held.set(u64::from(held));
            let returned = c.returned.get();
            let done = returned.wrapping_sub(l.returned[i]) as f64 / dt;
            l.returned[i] = returned;
            let busy = held >= BACKLOGGED && l.held[i] >= BACKLOGGED;
            l.held[i] = held;
            if !self.inst[i].served() {
                l.fill[i] = 0.0;
                continue;
            }
            // Relaxed reads of the VR's index: a load estimate.
            let fill: u32 = (0..vnics)
                .filter_map(|v| self.region.ring(i as u16, RingId::Rx(v)))
                .map(|r| r.occupancy())
                .sum();
            l.fill[i] += a * (f64::from(fill) - l.fill[i]);
            c.rx_fill_milli.set((l.fill[i] * 1000.0) as u64);
            if busy {
                l.capacity[i] += a * (done - l.capacity[i]);
                l.weight[i] = l.capacity[i];
                c.capacity_pps.set(l.capacity[i] as u64);
            } else if top > 0.0 {
                // Not busy: it can take more than it gets.
                l.weight[i] = (l.weight[i].max(done) * (1.0 + a)).min(2.0 * top);
            }
            if weighted && l.weight[i] > 0.0 {
                self.balancer.set_capacity(i as u16, l.weight[i]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use vrhost_shm::SlotState;

    use super::super::testkit::Kit;

    /// The EWMA weight of a sample `dt` after the last.
    fn weight(dt: f64) -> f64 {
        1.0 - (-dt / crate::stats::LOAD_TAU.as_secs_f64()).exp()
    }

    #[test]
    fn the_arrival_rate_and_an_instances_backlog_are_sampled() {
        let mut k = Kit::new(1, 1, 2048, 2048);
        let t0 = k.vp.cold.load.at;
        k.give_n(1000);
        let dt = 0.1;
        k.vp.sample_load(t0 + Duration::from_secs_f64(dt));
        let st = k.vp.stats();
        let want = weight(dt) * 1000.0 / dt;
        let got = st.arrival_pps.get() as f64;
        assert!((got - want).abs() < 1.0, "arrival {got}, want {want}");
        assert_eq!(st.instances[0].held.get(), 1000);
        // 1000 entries wait in its rx ring.
        let fill = st.instances[0].rx_fill_milli.get() as f64 / 1000.0;
        assert!((fill - weight(dt) * 1000.0).abs() < 0.01, "fill {fill}");
    }

    #[test]
    fn a_busy_instance_is_measured_by_what_it_hands_back() {
        let mut k = Kit::new(1, 1, 2048, 2048);
        let t0 = k.vp.cold.load.at;
        k.give_n(400);
        let t1 = t0 + Duration::from_millis(100);
        k.vp.sample_load(t1);
        assert_eq!(k.vp.stats().instances[0].capacity_pps.get(), 0);
        // It hands back 200 of the 400 in the next 100 ms and still holds
        // 200 (busy all along): 2000 frames/s.
        let s = k.take(0, 0);
        k.hand_back(0, 0, &s[..200], SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        k.vp.sample_load(t1 + Duration::from_millis(100));
        let cap = k.vp.stats().instances[0].capacity_pps.get() as f64;
        let want = weight(0.1) * 2000.0;
        assert!((cap - want).abs() < 1.0, "capacity {cap}, want {want}");
    }

    #[test]
    fn an_idle_instance_gets_no_capacity() {
        let mut k = Kit::new(1, 1, 2048, 2048);
        let t0 = k.vp.cold.load.at;
        k.give_n(10);
        let s = k.take(0, 0);
        k.hand_back(0, 0, &s, SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        k.vp.sample_load(t0 + Duration::from_millis(100));
        k.vp.sample_load(t0 + Duration::from_millis(200));
        // It kept up: what it handed back says nothing of what it could.
        assert_eq!(k.vp.stats().instances[0].capacity_pps.get(), 0);
    }
}
