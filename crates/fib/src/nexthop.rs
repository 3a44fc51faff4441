//! Next-hop tables: routes hold a [`NextHopId`]; the table maps it to the VR's next hop (out
//! vNIC + neighbour MAC or address: the type is the VR's). Equal next hops share one id, so
//! a full table with a few neighbours has a few entries, and ids stay within
//! [`MAX_NEXT_HOP`].

use std::collections::HashMap;
use std::hash::Hash;

use crate::{FibError, MAX_NEXT_HOP, NextHopId};

/// Interned next hops, indexed by [`NextHopId`].
#[derive(Debug, Clone)]
pub struct NextHopTable<T> {
    hops: Vec<T>,
    ids: HashMap<T, NextHopId>,
}

impl<T> Default for NextHopTable<T> {
    fn default() -> Self {
        Self {
            hops: Vec::new(),
            ids: HashMap::new(),
        }
    }
}

impl<T: Eq + Hash + Clone> NextHopTable<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `hop`, added if new.
    ///
    /// # Errors
    /// [`FibError::NextHop`] when the table already holds `MAX_NEXT_HOP + 1` next hops.
    pub fn intern(&mut self, hop: T) -> Result<NextHopId, FibError> {
        if let Some(&id) = self.ids.get(&hop) {
            return Ok(id);
        }
        let id = NextHopId::try_from(self.hops.len()).unwrap_or(NextHopId::MAX);
        if id > MAX_NEXT_HOP {
            return Err(FibError::NextHop {
                nh: id,
                max: MAX_NEXT_HOP,
            });
        }
        self.hops.push(hop.clone());
        self.ids.insert(hop, id);
        Ok(id)
    }

    /// The next hop of `id`, in the data path after a lookup.
    #[inline]
    pub fn get(&self, id: NextHopId) -> Option<&T> {
        self.hops.get(id as usize)
    }

    /// Number of next hops.
    pub fn len(&self) -> usize {
        self.hops.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.hops.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_hops_share_an_id() {
        let mut t = NextHopTable::new();
        let a = t.intern((1u16, [2u8; 6])).unwrap();
        let b = t.intern((2u16, [3u8; 6])).unwrap();
        assert_eq!(t.intern((1u16, [2u8; 6])).unwrap(), a);
        assert_ne!(a, b);
        assert_eq!(t.get(b), Some(&(2, [3; 6])));
        assert_eq!(t.get(9), None);
        assert_eq!(t.len(), 2);
    }
}
