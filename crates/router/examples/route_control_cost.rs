//! What a route-change control message costs the router instance: decoding
//! the message as the runtime does, then applying it, for `N` adds (by next
//! hop index and by gateway) and `N` deletes, on a table of `BASE` routes.
//!
//! ```sh
//! cargo run --release -p vrhost-router --example route_control_cost -- 10000 100000
//! ```

use std::time::{Duration, Instant};

use serde_json::json;
use vrhost_proto::HostMsg;
use vrhost_router::{Router, RouterConfig};
use vrhost_sdk::Vr;

/// `n` distinct /24 prefixes from `seed` (an LCG: the same every run).
fn prefixes(n: usize, seed: u64) -> Vec<String> {
    let mut x = seed;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let p = ((x >> 40) as u32 % (223 << 16)) + (1 << 16); // 1.0.x .. 223.255.x
        // Not 10.1.0.0/23, the router's own subnets.
        if p >> 9 != (10 << 7) && seen.insert(p) {
            out.push(format!("{}.{}.{}.0/24", p >> 16, (p >> 8) & 255, p & 255));
        }
    }
    out
}

/// Decode `msg` as the runtime does and hand its body to the router;
/// (decode time, apply time, the reply).
fn apply(r: &mut Router, msg: &[u8]) -> (Duration, Duration, serde_json::Value) {
    let t = Instant::now();
    let HostMsg::Control { body, .. } = serde_json::from_slice(msg).unwrap() else {
        unreachable!()
    };
    let decoded = t.elapsed();
    let t = Instant::now();
    let reply = r.control(&body).unwrap();
    (decoded, t.elapsed(), reply)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(10_000, |a| a.parse().unwrap());
    let base: usize = args.next().map_or(0, |a| a.parse().unwrap());
    let cfg: RouterConfig = serde_json::from_value(json!({
        "vnics": [{"mac": "02:00:00:00:10:00", "addrs": ["10.1.0.1/24"]},
                  {"mac": "02:00:00:00:10:01", "addrs": ["10.1.1.1/24"]}],
        "nexthops": [{"vnic": 1, "mac": "02:00:00:00:00:02"}],
    }))
    .unwrap();
    let mut r = Router::new(&cfg).unwrap();
    let all = prefixes(base + n, 42);
    for chunk in all[..base].chunks(1000) {
        let add: Vec<_> = chunk
            .iter()
            .map(|p| json!({"prefix": p, "nexthop": 0}))
            .collect();
        r.control(&json!({"routes": {"add": add}})).unwrap();
    }
    let mine = &all[base..];
    let msg =
        |body: serde_json::Value| serde_json::to_vec(&HostMsg::Control { id: 1, body }).unwrap();
    let by_index = msg(json!({"routes": {"add": mine.iter()
        .map(|p| json!({"prefix": p, "nexthop": 0})).collect::<Vec<_>>()}}));
    let by_via = msg(json!({"routes": {"add": mine.iter()
        .map(|p| json!({"prefix": p, "via": "10.1.1.2"})).collect::<Vec<_>>()}}));
    let del = msg(json!({"routes": {"del": mine}}));
    println!("{n} changes per message on a table of {base} routes");
    for (what, m) in [
        ("add, by next hop", &by_index),
        ("replace, by gateway", &by_via),
        ("delete", &del),
        ("add, by gateway", &by_via),
        ("delete", &del),
    ] {
        let (d, a, reply) = apply(&mut r, m);
        let per = |t: Duration| t.as_nanos() as f64 / n as f64;
        println!(
            "{what:>20}: {:>7} bytes, decode {:>6.2} ms ({:>4.0} ns/route), \
             apply {:>6.2} ms ({:>4.0} ns/route); {reply}",
            m.len(),
            d.as_secs_f64() * 1e3,
            per(d),
            a.as_secs_f64() * 1e3,
            per(a),
        );
    }
}
