//! `vrhost route list|add|del|import`: a VR's routes in the running daemon,
//! ip-route style (`vrhost route add tenant-a 192.0.2.0/24 via 10.1.1.2`),
//! and route files: `route import FILE` reads and measures one here, `route
//! import VR FILE` loads it into a VR in bulk requests.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use hyper::Method;
use serde::Serialize;
use vrhost_fib::import::{Format, ImportOptions, Progress, ProgressFn, RouteSet, read_routes};

use super::api::{Route, RouteBulk, RoutePage, RouteResult};
use super::client::{Answer, Client, encode, with_query};
use super::output::{Col, Table, opt, si};
use super::{ApiArgs, emit, one_shot};

/// Routes per bulk request by default: big enough that a full table is
/// some fifty requests, small enough for a steady progress bar and a
/// request size the server accepts.
pub const DEFAULT_CHUNK: u64 = 10_000;

/// `vrhost route ...`.
#[derive(Debug, Clone, clap::Args)]
pub struct RouteArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    #[command(subcommand)]
    pub cmd: RouteCmd,
}

/// What to do with routes.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum RouteCmd {
    /// A page of a VR's routes with their origin: by default those added
    /// at run time (through the API, and by its control plane).
    #[command(visible_alias = "ls")]
    List {
        /// The VR.
        vr: String,
        /// First route of the page.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Routes in the page (1..=100000).
        #[arg(long, default_value_t = 1000,
              value_parser = clap::value_parser!(u64).range(1..=100_000))]
        limit: u64,
        /// Every route, page after page.
        #[arg(long, conflicts_with_all = ["offset", "limit"])]
        all: bool,
        /// Which routes: `runtime` (default: API and control plane),
        /// `all` (the config's too), `config`, `api`, `control-plane`.
        #[arg(long)]
        origin: Option<String>,
    },
    /// Add or replace a route: VR PREFIX (via ADDR [dev VNIC] | nexthop N).
    Add {
        /// The VR.
        vr: String,
        /// The prefix, `A.B.C.D/LEN`.
        prefix: String,
        /// `via ADDR [dev VNIC]` or `nexthop N`.
        #[arg(required = true, num_args = 1.., value_name = "via ADDR [dev VNIC] | nexthop N")]
        how: Vec<String>,
    },
    /// Remove a route added through the API.
    #[command(visible_alias = "rm")]
    Del {
        /// The VR.
        vr: String,
        /// The prefix.
        prefix: String,
    },
    /// Import a route file (text, ipasn, MRT; plain, gzip or bzip2): with a
    /// VR, load it into that VR of the running daemon; without, read it
    /// here, build the FIBs and print what it held.
    #[command(override_usage = "vrhost route import [OPTIONS] [VR] FILE")]
    Import(ImportArgs),
}

/// `vrhost route import [VR] FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// [VR] FILE: the VR to load (none: only read and measure here), and
    /// the route file.
    #[arg(required = true, num_args = 1..=2, value_names = ["VR", "FILE"])]
    pub targets: Vec<String>,
    /// Format instead of detecting it: text, ipasn or mrt.
    #[arg(long)]
    pub format: Option<Format>,
    /// On a truncated or corrupt MRT record, keep the routes before it.
    #[arg(long)]
    pub keep_partial: bool,
    /// Print JSON instead of text (as -o json).
    #[arg(long)]
    pub json: bool,
    /// Loading: every route to this gateway.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["nexthop_mod", "file_nexthops"])]
    pub via: Option<Ipv4Addr>,
    /// Loading: the --via gateway's vNIC.
    #[arg(long, requires = "via", value_parser = clap::value_parser!(u16).range(0..=63))]
    pub vnic: Option<u16>,
    /// Loading: next hop index = the route's origin AS mod N (as the
    /// config's `route_file`).
    #[arg(long, value_name = "N", conflicts_with = "file_nexthops",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub nexthop_mod: Option<u32>,
    /// Loading: each route to the next hop the file gives it.
    #[arg(long)]
    pub file_nexthops: bool,
    /// Loading: routes per request.
    #[arg(long, default_value_t = DEFAULT_CHUNK, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub chunk: u64,
}

impl ImportArgs {
    /// How to read the file: `--format`, `--keep-partial`, and `progress`.
    fn read_options(&self, progress: Option<ProgressFn>) -> ImportOptions {
        ImportOptions {
            format: self.format,
            keep_partial: self.keep_partial,
            progress,
        }
    }
}

/// Run `vrhost route ...`.
///
/// # Errors
/// The daemon cannot be reached or refuses, bad arguments, a bad file.
pub fn run(args: &RouteArgs) -> Result<()> {
    let api = &args.api;
    match &args.cmd {
        RouteCmd::Import(a) => import(api, a),
        RouteCmd::List {
            vr,
            offset,
            limit,
            all,
            origin,
        } => {
            let c = one_shot(api)?;
            let base = format!("/v1/vrs/{}/routes", encode(vr));
            let page = |offset: u64, limit: u64| {
                c.get(&with_query(
                    &base,
                    &[
                        ("offset", Some(offset.to_string())),
                        ("limit", Some(limit.to_string())),
                        ("origin", origin.clone()),
                    ],
                ))
            };
            let answer = if *all {
                // Pages of the largest size until the total is reached; the
                // answer is one RoutePage holding every route.
                let mut routes = Vec::new();
                let mut total;
                loop {
                    let p: RoutePage = page(routes.len() as u64, 100_000)?.decode()?;
                    total = p.total;
                    let got = p.routes.len();
                    routes.extend(p.routes);
                    if got == 0 || routes.len() as u64 >= total {
                        break;
                    }
                }
                let all = RoutePage {
                    total,
                    offset: 0,
                    routes,
                };
                Answer::from_json(&format!("GET {base}"), serde_json::to_vec(&all)?)
            } else {
                page(*offset, *limit)?
            };
            emit(api, &answer, |a| {
                let p: RoutePage = a.decode()?;
                let end = p.offset + p.routes.len() as u64;
                if p.total == 0 {
                    eprintln!("{vr}: no routes (config, API or control plane)");
                } else if p.routes.is_empty() {
                    eprintln!("{vr}: no routes from {} ({} in all)", p.offset, p.total);
                } else {
                    table(&p.routes).print()?;
                    eprintln!("(routes {}-{} of {})", p.offset + 1, end, p.total);
                }
                Ok(())
            })
        }
        RouteCmd::Add { vr, prefix, how } => {
            let route = parse_route_words(prefix, how)?;
            let c = one_shot(api)?;
            let a = c.call(
                Method::POST,
                &format!("/v1/vrs/{}/routes", encode(vr)),
                Some(&route),
            )?;
            emit(api, &a, |a| {
                let r: RouteResult = a.decode()?;
                println!("{vr}: {}", result_line(&r));
                Ok(())
            })
        }
        RouteCmd::Del { vr, prefix } => {
            let c = one_shot(api)?;
            let path = with_query(
                &format!("/v1/vrs/{}/routes", encode(vr)),
                &[("prefix", Some(prefix.clone()))],
            );
            let a = c.call(Method::DELETE, &path, None::<&()>)?;
            emit(api, &a, |a| {
                let r: RouteResult = a.decode()?;
                println!("{vr}: {}", result_line(&r));
                Ok(())
            })
        }
    }
}

fn result_line(r: &RouteResult) -> String {
    format!(
        "{} added, {} deleted; {} routes in the table ({} through the API), {:.1} ms",
        r.added,
        r.deleted,
        r.routes,
        r.api_routes,
        r.seconds * 1e3
    )
}

/// Routes as a table.
pub fn table(routes: &[Route]) -> Table {
    Table::of(
        routes,
        &[
            (Col::l("PREFIX"), &|r| r.prefix.clone()),
            (Col::l("VIA"), &|r| opt(r.via.as_deref())),
            (Col::r("VNIC"), &|r| opt(r.vnic)),
            (Col::r("NEXTHOP"), &|r| opt(r.nexthop)),
            (Col::l("ORIGIN"), &|r| opt(r.origin.as_deref())),
        ],
    )
}

/// `via ADDR [dev VNIC]` or `nexthop N` after the prefix (`vnic` is a
/// synonym of `dev`).
///
/// # Errors
/// Words out of that grammar, a bad number, or both or neither next hop.
pub fn parse_route_words(prefix: &str, words: &[String]) -> Result<Route> {
    let mut r = Route {
        prefix: prefix.to_owned(),
        ..Route::default()
    };
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let mut value = || {
            it.next()
                .map(String::as_str)
                .ok_or_else(|| anyhow!("{w:?} needs a value"))
        };
        match w.as_str() {
            "via" => {
                let a = value()?;
                a.parse::<IpAddr>()
                    .map_err(|_| anyhow!("via {a:?}: not an address"))?;
                r.via = Some(a.to_owned());
            }
            "dev" | "vnic" => {
                let n = value()?;
                r.vnic = Some(
                    n.parse()
                        .map_err(|_| anyhow!("dev {n:?}: a vNIC index (0-63)"))?,
                );
            }
            "nexthop" | "nh" => {
                let n = value()?;
                r.nexthop = Some(
                    n.parse()
                        .map_err(|_| anyhow!("nexthop {n:?}: a next-hop index"))?,
                );
            }
            other => bail!("unexpected {other:?}: want via ADDR [dev VNIC] or nexthop N"),
        }
    }
    match (&r.via, r.nexthop) {
        (Some(_), Some(_)) => bail!("give via or nexthop, not both"),
        (None, None) => bail!("give via ADDR [dev VNIC] or nexthop N"),
        (None, Some(_)) if r.vnic.is_some() => bail!("dev goes with via"),
        _ => Ok(r),
    }
}

/// Where imported routes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHopPolicy {
    /// Every route to one gateway.
    Via(Ipv4Addr, Option<u16>),
    /// Next hop index = origin AS mod N.
    AsnMod(u32),
    /// The next hop the file gives each route.
    FromFile,
}

impl NextHopPolicy {
    fn from_args(a: &ImportArgs) -> Result<Self> {
        Ok(match (a.via, a.nexthop_mod, a.file_nexthops) {
            (Some(v), None, false) => NextHopPolicy::Via(v, a.vnic),
            (None, Some(n), false) => NextHopPolicy::AsnMod(n),
            (None, None, true) => NextHopPolicy::FromFile,
            (None, None, false) => bail!(
                "loading into a VR needs the routes' next hop: --via ADDR, --nexthop-mod N or --file-nexthops"
            ),
            _ => bail!("give one of --via, --nexthop-mod, --file-nexthops"),
        })
    }
}

/// The API routes of a route file's IPv4 routes (the router forwards IPv4
/// only) and how many IPv6 routes were left out.
///
/// # Errors
/// [`NextHopPolicy::FromFile`] and a route without an IPv4 next hop.
pub fn api_routes(set: &RouteSet, policy: NextHopPolicy) -> Result<(Vec<Route>, usize)> {
    let mut out = Vec::with_capacity(set.routes.len());
    let mut v6 = 0;
    for r in &set.routes {
        if r.prefix.is_ipv6() {
            v6 += 1;
            continue;
        }
        let mut route = Route {
            prefix: format!("{}/{}", r.prefix, r.len),
            ..Route::default()
        };
        match policy {
            NextHopPolicy::Via(gw, vnic) => {
                route.via = Some(gw.to_string());
                route.vnic = vnic;
            }
            NextHopPolicy::AsnMod(n) => route.nexthop = Some(r.asn.unwrap_or(0) % n),
            NextHopPolicy::FromFile => match r.nexthop {
                Some(IpAddr::V4(gw)) => route.via = Some(gw.to_string()),
                _ => bail!(
                    "{}: no IPv4 next hop in the file (use --via or --nexthop-mod)",
                    route.prefix
                ),
            },
        }
        out.push(route);
    }
    Ok((out, v6))
}

/// The bulk requests of a load: consecutive chunks of `size` routes (the
/// last one shorter), each route in exactly one.
pub fn bulk_chunks(routes: &[Route], size: usize) -> impl Iterator<Item = RouteBulk<'_>> {
    routes
        .chunks(size.max(1))
        .map(|add| RouteBulk { add, del: &[] })
}

/// What `route import VR FILE` prints with `-o json`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// The VR.
    pub vr: String,
    /// The file.
    pub file: String,
    /// Its format.
    pub format: Format,
    /// Routes sent (IPv4).
    pub routes: u64,
    /// IPv6 routes of the file, not sent.
    pub skipped_ipv6: u64,
    /// Bulk requests made.
    pub requests: u64,
    /// Seconds reading the file here.
    pub read_seconds: f64,
    /// Seconds of the load, first request to last answer.
    pub seconds: f64,
    /// `routes / seconds`.
    pub routes_per_second: f64,
    /// The server's own time, summed over the requests.
    pub server_seconds: f64,
    /// Routes in the VR's table after the load.
    pub table_routes: u64,
    /// The VR's API routes after the load.
    pub api_routes: u64,
}

fn import(api: &ApiArgs, a: &ImportArgs) -> Result<()> {
    let json = a.json || api.json();
    let (vr, file) = match a.targets.as_slice() {
        [file] => {
            if a.via.is_some() || a.nexthop_mod.is_some() || a.file_nexthops {
                bail!(
                    "--via, --nexthop-mod and --file-nexthops are for loading into a VR: give VR FILE"
                );
            }
            // Local: read and measure, as before the API existed.
            let opts = a.read_options(crate::progress_bar());
            return crate::route_import::run_route_import(Path::new(file), &opts, json).map(|_| ());
        }
        [vr, file] => (vr.as_str(), PathBuf::from(file)),
        _ => bail!("give [VR] FILE"),
    };
    let policy = NextHopPolicy::from_args(a)?;
    let client = one_shot(api)?;
    // Fail on a wrong VR name or an unreachable daemon before reading a
    // large file.
    client.get(&format!("/v1/vrs/{}", encode(vr)))?;

    let bar = crate::progress_bar();
    let t = Instant::now();
    let set = read_routes(&file, &a.read_options(bar.clone()));
    if bar.is_some() {
        eprintln!();
    }
    let set = set.map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let read_seconds = t.elapsed().as_secs_f64();
    let (routes, v6) = api_routes(&set, policy)?;
    if routes.is_empty() {
        bail!("{}: no IPv4 routes", file.display());
    }
    let mut report = load(&client, vr, &routes, a.chunk as usize)?;
    report.file = file.display().to_string();
    report.format = set.format;
    report.skipped_ipv6 = v6 as u64;
    report.read_seconds = read_seconds;
    if json {
        super::output::out(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else {
        println!(
            "{vr}: {} routes loaded in {:.2} s ({} routes/s, {} requests); the table now has {} routes ({} through the API)",
            report.routes,
            report.seconds,
            si(report.routes_per_second),
            report.requests,
            report.table_routes,
            report.api_routes,
        );
        eprintln!(
            "({} {} read in {:.2} s{})",
            report.file,
            report.format,
            report.read_seconds,
            if v6 > 0 {
                format!("; {v6} IPv6 routes left out: the router forwards IPv4 only")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// Send `routes` to `vr` in bulk requests of `chunk`, drawing progress.
fn load(client: &Client, vr: &str, routes: &[Route], chunk: usize) -> Result<LoadReport> {
    let path = format!("/v1/vrs/{}/routes/bulk", encode(vr));
    let bar = crate::progress_bar();
    let total = routes.len();
    let chunks = total.div_ceil(chunk.max(1));
    let t = Instant::now();
    let mut done = 0usize;
    let mut server_seconds = 0.0;
    let mut last = RouteResult::default();
    for (i, body) in bulk_chunks(routes, chunk).enumerate() {
        let n = body.add.len();
        let v = client
            .call(Method::POST, &path, Some(&body))
            .map_err(anyhow::Error::from)
            .and_then(|a| Ok(a.decode::<RouteResult>()?));
        if bar.is_some() && v.is_err() {
            eprintln!();
        }
        last = v.with_context(|| {
            format!(
                "loading routes {}-{} of {total} into {vr} (request {}/{chunks}; the {done} routes before were loaded)",
                done + 1,
                done + n,
                i + 1,
            )
        })?;
        server_seconds += last.seconds;
        done += n;
        if let Some(b) = &bar {
            b(&Progress {
                bytes: done as u64,
                total: Some(total as u64),
                routes: done,
            });
        }
    }
    if bar.is_some() {
        eprintln!();
    }
    let seconds = t.elapsed().as_secs_f64();
    Ok(LoadReport {
        vr: vr.to_owned(),
        file: String::new(),
        format: Format::Text,
        routes: total as u64,
        skipped_ipv6: 0,
        requests: chunks as u64,
        read_seconds: 0.0,
        seconds,
        routes_per_second: if seconds > 0.0 {
            total as f64 / seconds
        } else {
            0.0
        },
        server_seconds,
        table_routes: last.routes,
        api_routes: last.api_routes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn route_words() {
        let r = parse_route_words("192.0.2.0/24", &words("via 10.1.1.2")).unwrap();
        assert_eq!(r.via.as_deref(), Some("10.1.1.2"));
        assert_eq!((r.vnic, r.nexthop), (None, None));
        let r = parse_route_words("192.0.2.0/24", &words("via 10.1.1.2 dev 1")).unwrap();
        assert_eq!(r.vnic, Some(1));
        let r = parse_route_words("0.0.0.0/0", &words("nexthop 3")).unwrap();
        assert_eq!(r.nexthop, Some(3));
        for bad in [
            "",
            "via",
            "via nowhere",
            "via 10.0.0.1 nexthop 1",
            "nexthop 1 dev 0",
            "dev x via 10.0.0.1",
            "proto static",
        ] {
            assert!(
                parse_route_words("10.0.0.0/8", &words(bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn chunks_cover_every_route_once_in_order() {
        let routes: Vec<Route> = (0..25_001u32)
            .map(|i| Route {
                prefix: format!("{}/32", Ipv4Addr::from(i)),
                nexthop: Some(0),
                ..Route::default()
            })
            .collect();
        let sizes: Vec<usize> = bulk_chunks(&routes, 10_000).map(|b| b.add.len()).collect();
        assert_eq!(sizes, [10_000, 10_000, 5_001]);
        let flat: Vec<&Route> = bulk_chunks(&routes, 10_000).flat_map(|b| b.add).collect();
        assert_eq!(flat.len(), routes.len());
        assert!(flat.iter().zip(&routes).all(|(a, b)| *a == b));
        assert!(bulk_chunks(&routes, 10_000).all(|b| b.del.is_empty()));
        // Exact multiples make no empty request; a chunk of 0 is taken as 1.
        assert_eq!(bulk_chunks(&routes[..20_000], 10_000).count(), 2);
        assert_eq!(bulk_chunks(&routes[..3], 0).count(), 3);
        assert_eq!(bulk_chunks(&[], 10_000).count(), 0);
    }

    /// The routes of a file's `text` in `format`.
    fn read(text: &[u8], format: Format) -> RouteSet {
        vrhost_fib::import::read_routes_from(
            text,
            &ImportOptions {
                format: Some(format),
                ..ImportOptions::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn imported_routes_get_their_next_hop() {
        let set = read(
            b"1.0.0.0/24\t13335\n1.0.4.0/22\t56203\n2001:db8::/32\t1\n",
            Format::Ipasn,
        );
        let (r, v6) = api_routes(&set, NextHopPolicy::AsnMod(2)).unwrap();
        assert_eq!(v6, 1);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].prefix, "1.0.0.0/24");
        assert_eq!(r[0].nexthop, Some(13335 % 2));
        assert_eq!(r[1].nexthop, Some(56203 % 2));
        let gw = Ipv4Addr::new(10, 1, 1, 2);
        let (r, _) = api_routes(&set, NextHopPolicy::Via(gw, Some(1))).unwrap();
        assert!(
            r.iter()
                .all(|x| x.via.as_deref() == Some("10.1.1.2") && x.vnic == Some(1))
        );
        // ipasn has no next hops.
        assert!(api_routes(&set, NextHopPolicy::FromFile).is_err());

        let text = read(b"192.0.2.0/24 10.1.1.2\n", Format::Text);
        let (r, _) = api_routes(&text, NextHopPolicy::FromFile).unwrap();
        assert_eq!(r[0].via.as_deref(), Some("10.1.1.2"));
    }

    #[test]
    fn routes_table() {
        let routes = [
            Route {
                prefix: "192.0.2.0/24".into(),
                via: Some("10.1.1.2".into()),
                vnic: Some(1),
                nexthop: None,
                origin: Some("control-plane".into()),
            },
            Route {
                prefix: "0.0.0.0/0".into(),
                nexthop: Some(0),
                ..Route::default()
            },
        ];
        assert_eq!(
            table(&routes).render(),
            "PREFIX        VIA       VNIC  NEXTHOP  ORIGIN\n\
             192.0.2.0/24  10.1.1.2     1        -  control-plane\n\
             0.0.0.0/0     -            -        0  -\n"
        );
    }
}
