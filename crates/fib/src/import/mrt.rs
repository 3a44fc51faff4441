//! MRT TABLE_DUMP_V2 (RFC 6396) reader.

use std::io::BufRead;

use super::{ImportError, ImportOptions, ImportStats, Reporter, Route};

/// MRT record type/subtype pairs this reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrtRecordType {
    /// TABLE_DUMP_V2 / PEER_INDEX_TABLE.
    PeerIndexTable,
    /// TABLE_DUMP_V2 / RIB_IPV4_UNICAST.
    RibIpv4Unicast,
    /// TABLE_DUMP_V2 / RIB_IPV6_UNICAST.
    RibIpv6Unicast,
    /// Anything else (skipped and counted).
    Other(u16, u16),
}

/// Parse an MRT buffer (the fuzz entry point).
///
/// # Errors
/// As [`super::read_routes`].
pub fn parse_mrt(
    data: &[u8],
    keep_partial: bool,
) -> Result<(Vec<Route>, ImportStats), ImportError> {
    let rep = Reporter {
        progress: None,
        count: Default::default(),
        total: None,
    };
    let mut r = data;
    read_mrt(
        &mut r,
        &ImportOptions {
            keep_partial,
            ..Default::default()
        },
        &rep,
    )
}

pub(crate) fn read_mrt<R: BufRead>(
    _r: &mut R,
    _opts: &ImportOptions,
    _rep: &Reporter<'_>,
) -> Result<(Vec<Route>, ImportStats), ImportError> {
    Err(ImportError::Empty)
}
