//! Text and ipasn parsers, and the auto-detecting reader (compression and format): any
//! input gives routes or an error, never a panic; parsed routes load into the FIB.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vrhost_fib::import::{Format, ImportOptions, parse_text, read_routes_from};

fuzz_target!(|data: &[u8]| {
    for f in [Format::Text, Format::Ipasn] {
        if let Ok((routes, _)) = parse_text(data, f) {
            let mut v4 = vrhost_fib::Ipv4Fib::new();
            for r in routes.iter().filter(|r| r.prefix.is_ipv4()) {
                if let std::net::IpAddr::V4(a) = r.prefix {
                    v4.insert(u32::from(a), r.len, 1)
                        .expect("parsed prefixes are valid");
                }
            }
        }
    }
    let _ = read_routes_from(
        data,
        &ImportOptions {
            keep_partial: true,
            ..Default::default()
        },
    );
});
