//! A naive longest-prefix match (linear scan over all routes): the reference the property
//! and differential tests compare every other implementation with.

use crate::{FibError, Key, Lpm, NextHopId};

/// Routes in a vector; lookup scans them all. Only for tests.
#[derive(Debug, Clone, Default)]
pub struct NaiveLpm<K: Key> {
    routes: Vec<(K, u8, NextHopId)>,
}

impl<K: Key> NaiveLpm<K> {
    /// An empty table.
    pub fn new() -> Self {
        Self { routes: Vec::new() }
    }
}

impl<K: Key> Lpm<K> for NaiveLpm<K> {
    fn insert(&mut self, prefix: K, len: u8, nh: NextHopId) -> Result<Option<NextHopId>, FibError> {
        if len > K::BITS {
            return Err(FibError::PrefixLength { len, max: K::BITS });
        }
        let p = prefix.mask(len);
        if let Some(r) = self.routes.iter_mut().find(|r| r.0 == p && r.1 == len) {
            return Ok(Some(std::mem::replace(&mut r.2, nh)));
        }
        self.routes.push((p, len, nh));
        Ok(None)
    }

    fn remove(&mut self, prefix: K, len: u8) -> Option<NextHopId> {
        let p = prefix.mask(len.min(K::BITS));
        let i = self.routes.iter().position(|r| r.0 == p && r.1 == len)?;
        Some(self.routes.swap_remove(i).2)
    }

    fn lookup(&self, addr: K) -> Option<NextHopId> {
        self.routes
            .iter()
            .filter(|r| addr.mask(r.1) == r.0)
            .max_by_key(|r| r.1)
            .map(|r| r.2)
    }

    fn len(&self) -> usize {
        self.routes.len()
    }
}
