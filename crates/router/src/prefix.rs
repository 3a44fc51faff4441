//! Prefixes written `A.B.C.D/LEN` and `X:X::X/LEN`, as configs and the
//! API give them.

/// Parse `A.B.C.D/LEN`.
pub fn parse_prefix(s: &str) -> Result<(u32, u8), String> {
    let (addr, len) = parse_addr_len::<std::net::Ipv4Addr>(s, "A.B.C.D/LEN", 32)?;
    Ok((u32::from(addr), len))
}

/// Parse `X:X::X/LEN`.
pub fn parse_prefix6(s: &str) -> Result<(u128, u8), String> {
    let (addr, len) = parse_addr_len::<std::net::Ipv6Addr>(s, "X:X::X/LEN", 128)?;
    Ok((u128::from(addr), len))
}

/// Parse an address of type `A` and a length of at most `max` bits,
/// written `form` (named in errors).
pub(crate) fn parse_addr_len<A: std::str::FromStr>(
    s: &str,
    form: &str,
    max: u8,
) -> Result<(A, u8), String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("prefix {s:?}: expected {form}"))?;
    let addr: A = a
        .parse()
        .map_err(|_| format!("prefix {s:?}: bad address {a:?}"))?;
    let len: u8 = l
        .parse()
        .map_err(|_| format!("prefix {s:?}: bad length {l:?}"))?;
    if len > max {
        return Err(format!("prefix {s:?}: length {len} > {max}"));
    }
    Ok((addr, len))
}
