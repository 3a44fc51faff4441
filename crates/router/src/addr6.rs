//! IPv6 addresses and prefixes as the config writes them, and [`Net`], a
//! prefix of either family (the IPv4 parsers are in `config.rs`).

use std::net::Ipv6Addr;

use super::config::{parse_addr_len, parse_prefix};
use super::{Iface6, Vnic, mask, mask6};

/// Parse `X:X::X/LEN`.
pub(super) fn parse_prefix6(s: &str) -> Result<(u128, u8), String> {
    let (addr, len) = parse_addr_len::<Ipv6Addr>(s, "X:X::X/LEN", 128)?;
    Ok((addr.to_bits(), len))
}

/// A prefix of either family, host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Net {
    /// IPv4.
    V4(u32, u8),
    /// IPv6.
    V6(u128, u8),
}

/// Parse `A.B.C.D/LEN` or `X:X::X/LEN` (an address with a colon is
/// IPv6), host bits cleared.
pub(super) fn parse_net(s: &str) -> Result<Net, String> {
    if s.contains(':') {
        let (p, l) = parse_prefix6(s)?;
        Ok(Net::V6(p & mask6(l), l))
    } else {
        let (p, l) = parse_prefix(s)?;
        Ok(Net::V4(p & mask(l), l))
    }
}

/// An IPv6 interface address, `X:X::X/LEN` with the host part kept.
pub(super) fn parse_iface6(s: &str) -> Result<Iface6, String> {
    let (addr, len) = parse_prefix6(s)?;
    if len == 0 {
        return Err("length 0: an interface address needs a subnet".into());
    }
    if addr == 0 || addr == 1 || vrhost_packet::ipv6::is_multicast(addr) {
        return Err("not a unicast address".into());
    }
    Ok(Iface6 { addr, len })
}

pub(super) fn parse_ip6(s: &str) -> Result<u128, String> {
    s.parse::<Ipv6Addr>()
        .map(Ipv6Addr::to_bits)
        .map_err(|_| format!("{s:?}: not an IPv6 address"))
}

/// The vNIC whose IPv6 subnet holds `ip`, the longest subnet first
/// (link-local addresses name no subnet: every link has `fe80::/64`).
pub(super) fn vnic_for6(vnics: &[Vnic], ip: u128) -> Option<u16> {
    vnics
        .iter()
        .enumerate()
        .flat_map(|(v, n)| n.addrs6.iter().map(move |a| (v, a)))
        .filter(|(_, a)| !vrhost_packet::ipv6::is_link_local(a.addr) && a.contains(ip))
        .max_by_key(|(_, a)| a.len)
        .map(|(v, _)| v as u16)
}

pub(super) fn is_local6(vnics: &[Vnic], ip: u128) -> bool {
    vnics.iter().any(|v| v.addrs6.iter().any(|a| a.addr == ip))
}
