//! MRT TABLE_DUMP_V2 reader (RFC 6396): PEER_INDEX_TABLE, RIB_IPV4_UNICAST and
//! RIB_IPV6_UNICAST; other types and subtypes are skipped and counted.
//!
//! The reader streams: one record in memory at a time. Every field access goes through
//! [`Cursor`], which checks lengths, so a corrupt record is an error naming its offset and
//! never a panic. Offsets are in the decompressed stream.

use std::io::{self, BufRead, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{ImportError, ImportOptions, ImportStats, Reporter, Route, Truncation, mask_ip};

/// MRT type TABLE_DUMP_V2 (RFC 6396 §4.3).
const TABLE_DUMP_V2: u16 = 13;
const PEER_INDEX_TABLE: u16 = 1;
const RIB_IPV4_UNICAST: u16 = 2;
const RIB_IPV6_UNICAST: u16 = 4;
/// Common header: timestamp(4) type(2) subtype(2) length(4).
const HEADER_LEN: usize = 12;
/// Larger records are taken as corrupt (a RIB record with thousands of peers is < 1 MiB).
const MAX_RECORD: usize = 16 << 20;
/// BGP path attribute types (RFC 4271, RFC 4760).
const ATTR_AS_PATH: u8 = 2;
const ATTR_NEXT_HOP: u8 = 3;
const ATTR_MP_REACH_NLRI: u8 = 14;
const AS_SEQUENCE: u8 = 2;

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

impl MrtRecordType {
    fn of(ty: u16, sub: u16) -> Self {
        match (ty, sub) {
            (TABLE_DUMP_V2, PEER_INDEX_TABLE) => Self::PeerIndexTable,
            (TABLE_DUMP_V2, RIB_IPV4_UNICAST) => Self::RibIpv4Unicast,
            (TABLE_DUMP_V2, RIB_IPV6_UNICAST) => Self::RibIpv6Unicast,
            _ => Self::Other(ty, sub),
        }
    }
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

/// Bounds-checked big-endian reader over one record body.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                format!(
                    "{what}: needs {n} bytes at body offset {}, {} left",
                    self.pos,
                    self.buf.len() - self.pos
                )
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn ip(&mut self, v6: bool, what: &str) -> Result<IpAddr, String> {
        Ok(if v6 {
            let b: [u8; 16] = self
                .take(16, what)?
                .try_into()
                .map_err(|_| what.to_owned())?;
            IpAddr::V6(Ipv6Addr::from(b))
        } else {
            let b: [u8; 4] = self
                .take(4, what)?
                .try_into()
                .map_err(|_| what.to_owned())?;
            IpAddr::V4(Ipv4Addr::from(b))
        })
    }
}

/// How a read of `buf.len()` bytes ended.
enum Fill {
    Full,
    /// Clean end of input before the first byte.
    Eof,
    /// Input ended (or failed) after `got` bytes.
    Short {
        got: usize,
        why: String,
    },
}

fn fill<R: Read>(r: &mut R, buf: &mut [u8]) -> Fill {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Fill::Eof,
            Ok(0) => {
                return Fill::Short {
                    got,
                    why: "input ends inside the record".into(),
                };
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Fill::Short {
                    got,
                    why: format!("compressed stream broken: {e}"),
                };
            }
        }
    }
    Fill::Full
}

pub(crate) fn read_mrt<R: BufRead>(
    r: &mut R,
    opts: &ImportOptions,
    rep: &Reporter<'_>,
) -> Result<(Vec<Route>, ImportStats), ImportError> {
    let mut routes = Vec::new();
    let mut stats = ImportStats::default();
    let mut peers_v6: Vec<bool> = Vec::new();
    let mut body = Vec::new();
    let mut offset = 0u64;
    let mut whole = 0u64;
    let cut = |stats: &mut ImportStats,
               offset: u64,
               whole: u64,
               reason: String|
     -> Result<(), ImportError> {
        if opts.keep_partial {
            stats.truncated = Some(Truncation {
                offset,
                records_kept: whole,
                reason,
            });
            Ok(())
        } else {
            Err(ImportError::Truncated {
                offset,
                records_kept: whole,
                reason,
            })
        }
    };
    loop {
        let mut hdr = [0u8; HEADER_LEN];
        match fill(r, &mut hdr) {
            Fill::Full => {}
            Fill::Eof => break,
            Fill::Short { got, why } => {
                cut(
                    &mut stats,
                    offset,
                    whole,
                    format!("{why}: header has {got} of {HEADER_LEN} bytes"),
                )?;
                break;
            }
        }
        let ty = u16::from_be_bytes([hdr[4], hdr[5]]);
        let sub = u16::from_be_bytes([hdr[6], hdr[7]]);
        let len = u32::from_be_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]) as usize;
        if len > MAX_RECORD {
            cut(
                &mut stats,
                offset,
                whole,
                format!("record length {len} exceeds {MAX_RECORD} (corrupt header)"),
            )?;
            break;
        }
        body.resize(len, 0);
        let short = match fill(r, &mut body) {
            Fill::Full => None,
            Fill::Eof => Some((0, "input ends inside the record".to_owned())),
            Fill::Short { got, why } => Some((got, why)),
        };
        if let Some((got, why)) = short {
            cut(
                &mut stats,
                offset,
                whole,
                format!("{why}: body has {got} of {len} bytes"),
            )?;
            stats.bytes = offset + (HEADER_LEN + got) as u64;
            break;
        }
        let parsed = match MrtRecordType::of(ty, sub) {
            MrtRecordType::PeerIndexTable => parse_peer_index(&body).map(|p| {
                stats.peers = p.len() as u64;
                peers_v6 = p;
            }),
            MrtRecordType::RibIpv4Unicast => {
                parse_rib(&body, false, &peers_v6, &mut routes, &mut stats)
            }
            MrtRecordType::RibIpv6Unicast => {
                parse_rib(&body, true, &peers_v6, &mut routes, &mut stats)
            }
            MrtRecordType::Other(..) => {
                stats.skipped_records += 1;
                Ok(())
            }
        };
        if let Err(msg) = parsed {
            cut(
                &mut stats,
                offset,
                whole,
                format!("corrupt record (type {ty}/{sub}): {msg}"),
            )?;
            break;
        }
        offset += (HEADER_LEN + len) as u64;
        whole += 1;
        stats.records = whole;
        stats.bytes = offset;
        if whole.is_multiple_of(4096) {
            rep.report(routes.len());
        }
    }
    if offset == 0 && stats.truncated.is_none() {
        return Err(ImportError::Empty);
    }
    Ok((routes, stats))
}

/// PEER_INDEX_TABLE (RFC 6396 §4.3.1): returns, per peer, whether its address is IPv6.
fn parse_peer_index(b: &[u8]) -> Result<Vec<bool>, String> {
    let mut c = Cursor { buf: b, pos: 0 };
    c.u32("collector BGP ID")?;
    let name_len = c.u16("view name length")?;
    c.take(usize::from(name_len), "view name")?;
    let n = c.u16("peer count")?;
    let mut peers = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let ty = c.u8("peer type")?;
        c.u32("peer BGP ID")?;
        let v6 = ty & 1 != 0;
        c.ip(v6, "peer address")?;
        c.take(if ty & 2 != 0 { 4 } else { 2 }, "peer AS")?;
        peers.push(v6);
    }
    Ok(peers)
}

/// RIB_IPV4_UNICAST / RIB_IPV6_UNICAST (RFC 6396 §4.3.2): one route per prefix, with the
/// next hop and origin AS of its first RIB entry.
fn parse_rib(
    b: &[u8],
    v6: bool,
    _peers: &[bool],
    routes: &mut Vec<Route>,
    stats: &mut ImportStats,
) -> Result<(), String> {
    let mut c = Cursor { buf: b, pos: 0 };
    c.u32("sequence number")?;
    let len = c.u8("prefix length")?;
    let max = if v6 { 128 } else { 32 };
    if len > max {
        return Err(format!("prefix length /{len} out of range (max /{max})"));
    }
    let bytes = c.take(usize::from(len).div_ceil(8), "prefix")?;
    let addr = if v6 {
        let mut a = [0u8; 16];
        a[..bytes.len()].copy_from_slice(bytes);
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        let mut a = [0u8; 4];
        a[..bytes.len()].copy_from_slice(bytes);
        IpAddr::V4(Ipv4Addr::from(a))
    };
    let (prefix, len, host_bits) = mask_ip(addr, len);
    if host_bits {
        stats.host_bits_set += 1;
    }
    let entries = c.u16("entry count")?;
    let mut route = Route {
        prefix,
        len,
        nexthop: None,
        asn: None,
    };
    for i in 0..entries {
        c.u16("peer index")?;
        c.u32("originated time")?;
        let alen = c.u16("attribute length")?;
        let attrs = c.take(usize::from(alen), "attributes")?;
        if i == 0 {
            parse_attrs(attrs, v6, &mut route)?;
        }
    }
    routes.push(route);
    Ok(())
}

/// BGP path attributes: NEXT_HOP, MP_REACH_NLRI's next hop, and AS_PATH's origin AS.
fn parse_attrs(b: &[u8], v6: bool, route: &mut Route) -> Result<(), String> {
    let mut c = Cursor { buf: b, pos: 0 };
    while c.pos < b.len() {
        let flags = c.u8("attribute flags")?;
        let ty = c.u8("attribute type")?;
        let len = if flags & 0x10 != 0 {
            usize::from(c.u16("attribute length")?)
        } else {
            usize::from(c.u8("attribute length")?)
        };
        let v = c.take(len, "attribute value")?;
        let mut a = Cursor { buf: v, pos: 0 };
        match ty {
            ATTR_NEXT_HOP if !v6 && len == 4 => route.nexthop = Some(a.ip(false, "NEXT_HOP")?),
            ATTR_MP_REACH_NLRI if len > 0 => {
                // RFC 6396 §4.3.4: only the next-hop length and address are kept; some
                // dumpers write the full attribute (AFI, SAFI first).
                let first = a.u8("MP_REACH next-hop length")?;
                let nh_len = if usize::from(first) + 1 == len {
                    first
                } else {
                    // Full form: AFI (2, of which `first` was the high byte), SAFI (1).
                    a.take(2, "MP_REACH AFI/SAFI")?;
                    a.u8("MP_REACH next-hop length")?
                };
                match nh_len {
                    16 | 32 => route.nexthop = Some(a.ip(true, "MP_REACH next hop")?),
                    4 | 12 => route.nexthop = Some(a.ip(false, "MP_REACH next hop")?),
                    _ => {}
                }
            }
            ATTR_AS_PATH => {
                while a.pos < v.len() {
                    let seg = a.u8("AS_PATH segment type")?;
                    let n = a.u8("AS_PATH segment length")?;
                    let asns = a.take(usize::from(n) * 4, "AS_PATH segment")?;
                    if seg == AS_SEQUENCE && n > 0 {
                        let l = &asns[asns.len() - 4..];
                        route.asn = Some(u32::from_be_bytes([l[0], l[1], l[2], l[3]]));
                    } else {
                        // An AS_SET last: no single origin.
                        route.asn = None;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ty: u16, sub: u16, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0x53, 0x7e, 0xd0, 0x00];
        v.extend_from_slice(&ty.to_be_bytes());
        v.extend_from_slice(&sub.to_be_bytes());
        v.extend_from_slice(&(body.len() as u32).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn peer_index() -> Vec<u8> {
        let mut b = vec![10, 0, 0, 1, 0, 0, 0, 2];
        b.extend_from_slice(&[2, 1, 1, 1, 1, 192, 0, 2, 1, 0, 0, 0xfd, 0xe8]); // AS4, v4 peer
        b.extend_from_slice(&[3, 2, 2, 2, 2]); // AS4, v6 peer
        b.extend_from_slice(&[
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xfd, 0xe9,
        ]);
        record(TABLE_DUMP_V2, PEER_INDEX_TABLE, &b)
    }

    fn rib4(prefix: [u8; 3], len: u8, asn: u32) -> Vec<u8> {
        let mut attrs = vec![0x40, 3, 4, 192, 0, 2, 1]; // NEXT_HOP
        attrs.extend_from_slice(&[0x50, 2, 0, 10, 2, 2]); // AS_PATH, extended length, AS_SEQUENCE of 2
        attrs.extend_from_slice(&64500u32.to_be_bytes());
        attrs.extend_from_slice(&asn.to_be_bytes());
        let mut b = vec![0, 0, 0, 7, len];
        b.extend_from_slice(&prefix[..usize::from(len).div_ceil(8)]);
        b.extend_from_slice(&[0, 1, 0, 0, 0x53, 0x7e, 0, 0]);
        b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        b.extend_from_slice(&attrs);
        record(TABLE_DUMP_V2, RIB_IPV4_UNICAST, &b)
    }

    fn rib6() -> Vec<u8> {
        let attrs = [
            0x80, 14, 17, 16, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        ];
        let mut b = vec![
            0, 0, 0, 8, 32, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 1, 0, 0, 0, 0,
        ];
        b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        b.extend_from_slice(&attrs);
        record(TABLE_DUMP_V2, RIB_IPV6_UNICAST, &b)
    }

    #[test]
    fn parses_peer_index_and_ribs() {
        let mut f = peer_index();
        f.extend(rib4([10, 1, 0], 16, 65001));
        f.extend(record(16, 4, &[1, 2, 3])); // BGP4MP: skipped
        f.extend(rib4([10, 2, 3], 24, 65002));
        f.extend(rib6());
        let (r, st) = parse_mrt(&f, false).unwrap();
        assert_eq!(st.peers, 2);
        assert_eq!(st.records, 5);
        assert_eq!(st.skipped_records, 1);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].prefix, IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)));
        assert_eq!((r[0].len, r[0].asn), (16, Some(65001)));
        assert_eq!(r[0].nexthop, Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))));
        assert_eq!(r[2].prefix, "2001:db8::".parse::<IpAddr>().unwrap());
        assert_eq!(r[2].nexthop, Some("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn every_cut_is_reported_never_panics() {
        let mut f = peer_index();
        let first = f.len() as u64;
        f.extend(rib4([10, 1, 0], 16, 65001));
        let second = f.len() as u64;
        f.extend(rib4([10, 2, 3], 24, 65002));
        for cut in 1..f.len() {
            let data = &f[..cut];
            match parse_mrt(data, false) {
                Ok((r, _)) => assert!(
                    cut as u64 == first || cut as u64 == second,
                    "cut {cut}: ok with {} routes",
                    r.len()
                ),
                Err(ImportError::Truncated {
                    offset,
                    records_kept,
                    ..
                }) => {
                    let (want_off, want_kept) = if (cut as u64) < first {
                        (0, 0)
                    } else if (cut as u64) < second {
                        (first, 1)
                    } else {
                        (second, 2)
                    };
                    assert_eq!((offset, records_kept), (want_off, want_kept), "cut {cut}");
                }
                Err(e) => panic!("cut {cut}: {e}"),
            }
            let (r, st) = parse_mrt(data, true).unwrap();
            let t = st.truncated.as_ref();
            assert_eq!(
                r.len() as u64,
                t.map_or(st.records, |t| t.records_kept).saturating_sub(1),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn corrupt_fields_are_errors() {
        let mut f = peer_index();
        let mut bad = rib4([10, 1, 0], 16, 1);
        bad[HEADER_LEN + 4] = 40; // prefix length /40
        f.extend(bad);
        let e = parse_mrt(&f, false).unwrap_err().to_string();
        assert!(
            e.contains("/40 out of range") && e.contains(&format!("offset {}", peer_index().len())),
            "{e}"
        );
        let huge = record(TABLE_DUMP_V2, RIB_IPV4_UNICAST, &[]);
        let mut h = huge.clone();
        h[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(
            parse_mrt(&h, false)
                .unwrap_err()
                .to_string()
                .contains("exceeds")
        );
        assert!(matches!(parse_mrt(&[], false), Err(ImportError::Empty)));
    }
}
