//! Line formats: `PREFIX [NEXTHOP]` and ipasn `PREFIX<TAB>ASN`.

use std::io::BufRead;
use std::net::IpAddr;

use super::{Format, ImportError, ImportOptions, ImportStats, Reporter, Route, parse_prefix};

/// Parse a whole text or ipasn buffer (the fuzz entry point).
///
/// # Errors
/// As [`super::read_routes`].
pub fn parse_text(data: &[u8], format: Format) -> Result<(Vec<Route>, ImportStats), ImportError> {
    let rep = Reporter {
        progress: None,
        count: Default::default(),
        total: None,
    };
    let mut r = data;
    read_text(&mut r, format, &ImportOptions::default(), &rep)
}

pub(crate) fn read_text<R: BufRead>(
    r: &mut R,
    format: Format,
    _opts: &ImportOptions,
    rep: &Reporter<'_>,
) -> Result<(Vec<Route>, ImportStats), ImportError> {
    let mut routes = Vec::new();
    let mut stats = ImportStats::default();
    let mut buf = Vec::with_capacity(128);
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = r
            .read_until(b'\n', &mut buf)
            .map_err(|source| ImportError::Read {
                offset: stats.bytes,
                source,
            })?;
        if n == 0 {
            break;
        }
        stats.bytes += n as u64;
        line += 1;
        let s = std::str::from_utf8(&buf).map_err(|_| ImportError::Line {
            line,
            msg: "not UTF-8".into(),
        })?;
        let s = s.trim();
        if s.is_empty() || s.starts_with(';') || s.starts_with('#') {
            continue;
        }
        stats.records += 1;
        let route = parse_line(s, format).map_err(|msg| ImportError::Line { line, msg })?;
        if route.1 {
            stats.host_bits_set += 1;
        }
        routes.push(route.0);
        if routes.len().is_multiple_of(65536) {
            rep.report(routes.len());
        }
    }
    if line == 0 {
        return Err(ImportError::Empty);
    }
    Ok((routes, stats))
}

fn parse_line(s: &str, format: Format) -> Result<(Route, bool), String> {
    let mut fields = s.split_whitespace();
    let p = fields.next().ok_or("empty line")?;
    let (prefix, len, host_bits) = parse_prefix(p)?;
    let mut route = Route {
        prefix,
        len,
        nexthop: None,
        asn: None,
    };
    if let Some(f) = fields.next() {
        match format {
            Format::Ipasn => route.asn = Some(f.parse().map_err(|_| format!("invalid ASN {f:?}"))?),
            _ => {
                let nh: IpAddr = f.parse().map_err(|_| format!("invalid next hop {f:?}"))?;
                if nh.is_ipv4() != prefix.is_ipv4() {
                    return Err(format!("next hop {nh} is not of the prefix's family"));
                }
                route.nexthop = Some(nh);
            }
        }
    }
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected field {extra:?}"));
    }
    Ok((route, host_bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_ipasn_lines() {
        let (r, st) = parse_text(
            b"; c\n10.0.0.0/8 192.0.2.1\n\n10.1.2.3/16\n2001:db8::/32 fe80::1\n",
            Format::Text,
        )
        .unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(st.host_bits_set, 1);
        assert_eq!(r[1].prefix, "10.1.0.0".parse::<IpAddr>().unwrap());
        assert_eq!(r[2].nexthop, Some("fe80::1".parse().unwrap()));
        let (r, _) = parse_text(b"1.0.0.0/24\t15169\n", Format::Ipasn).unwrap();
        assert_eq!(r[0].asn, Some(15169));
    }

    #[test]
    fn bad_lines_name_the_line() {
        for (input, want) in [
            (
                &b"10.0.0.0/8\n10.0.0.0/33\n"[..],
                "line 2: prefix length /33",
            ),
            (b"1.2.3/8\n", "line 1: invalid address"),
            (b"10.0.0.0/8 x\n", "line 1: invalid next hop"),
            (b"10.0.0.0/8 ::1\n", "line 1: next hop ::1"),
            (b"10.0.0.0/8 1.1.1.1 z\n", "line 1: unexpected field"),
            (b"\xff\n", "line 1: not UTF-8"),
        ] {
            let e = parse_text(input, Format::Text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
        }
        assert!(matches!(
            parse_text(b"", Format::Text),
            Err(ImportError::Empty)
        ));
        let e = parse_text(b"1.0.0.0/24\tAS1\n", Format::Ipasn)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid ASN"), "{e}");
    }
}
