//! The bench's route tables: the address family of a run, the two-route
//! table or a route file's routes of that family (a cut MRT file used to
//! its last whole record), and the router config that holds them.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use serde::Serialize;
use vrhost_router::{NextHopConfig, RouteConfig, RouterConfig, VnicConfig};

use super::{MemoryArgs, SINK_MAC, mac};
use crate::{Context, Result, bail};

/// The address family of the generated frames and the routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// UDP over IPv4.
    Ipv4,
    /// UDP over IPv6 (no extension headers).
    Ipv6,
}

impl Family {
    /// `ipv4` or `ipv6`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }
}

/// A route table for the bench: its router config part and the prefixes the
/// generator draws destinations from.
pub struct Table {
    pub(super) family: Family,
    routes: Vec<RouteConfig>,
    pub(super) route_file: Option<String>,
    pub(super) prefixes: Vec<(u32, u8)>,
    pub(super) prefixes6: Vec<(u128, u8)>,
    /// The routes kept from a cut file, written out for the VRs (removed
    /// with the table).
    _kept: Option<KeptFile>,
}

/// A file removed when dropped.
struct KeptFile(PathBuf);

impl Drop for KeptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The whole records of a cut route file (a partial MRT download, as
/// `../shared/data/mrt` has), as a text file the VRs' routers read.
fn keep_whole_records(spec: &str, set: &vrhost_fib::import::RouteSet) -> Result<KeptFile> {
    use std::fmt::Write as _;
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("vrhost-bench-{}-{n}.txt", std::process::id()));
    let mut text = String::new();
    for r in &set.routes {
        let _ = writeln!(text, "{}/{}\t{}", r.prefix, r.len, r.asn.unwrap_or(0));
    }
    let kept = KeptFile(path);
    std::fs::write(&kept.0, text)
        .with_context(|| format!("route table {spec}: writing its routes"))?;
    Ok(kept)
}

impl Table {
    /// An IPv4 table: `2` or a route file with IPv4 routes.
    pub fn load(spec: &str) -> Result<Self> {
        match Self::load_family(spec, Family::Ipv4)? {
            Some(t) => Ok(t),
            None => bail!("route table {spec} has no IPv4 routes"),
        }
    }

    /// A table of `family`: `2` (two /1 routes) or a route file's routes
    /// of that family (`None` if it has none).
    pub fn load_family(spec: &str, family: Family) -> Result<Option<Self>> {
        let mut t = Self {
            family,
            routes: vec![],
            route_file: None,
            prefixes: vec![],
            prefixes6: vec![],
            _kept: None,
        };
        if spec == "2" {
            let halves = match family {
                Family::Ipv4 => ["0.0.0.0/1", "128.0.0.0/1"],
                Family::Ipv6 => ["::/1", "8000::/1"],
            };
            t.routes = halves
                .iter()
                .map(|p| RouteConfig {
                    prefix: (*p).into(),
                    nexthop: Some(0),
                    ..RouteConfig::default()
                })
                .collect();
            return Ok(Some(t));
        }
        let path = std::path::Path::new(spec);
        let opts = vrhost_fib::import::ImportOptions {
            keep_partial: true,
            ..Default::default()
        };
        let set = vrhost_fib::import::read_routes(path, &opts)
            .with_context(|| format!("route table {spec}"))?;
        t.prefixes = set.ipv4().map(|r| (r.prefix, r.len)).collect();
        t.prefixes6 = set.ipv6().map(|r| (r.prefix, r.len)).collect();
        let none = match family {
            Family::Ipv4 => t.prefixes.is_empty(),
            Family::Ipv6 => t.prefixes6.is_empty(),
        };
        if none {
            return Ok(None);
        }
        let file = match &set.stats.truncated {
            Some(cut) => {
                eprintln!(
                    "route table {spec}: cut at byte {} ({}); its {} whole records are used",
                    cut.offset, cut.reason, cut.records_kept
                );
                let kept = keep_whole_records(spec, &set)?;
                let p = kept.0.clone();
                t._kept = Some(kept);
                p
            }
            None => std::fs::canonicalize(path).with_context(|| format!("route table {spec}"))?,
        };
        t.route_file = Some(file.to_string_lossy().into_owned());
        Ok(Some(t))
    }

    /// Routes in the table (of its family).
    pub fn len(&self) -> usize {
        match (self.route_file.is_some(), self.family) {
            (false, _) => self.routes.len(),
            (true, Family::Ipv4) => self.prefixes.len(),
            (true, Family::Ipv6) => self.prefixes6.len(),
        }
    }

    /// The table's address family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// True if it has no route.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn router_config(&self) -> RouterConfig {
        RouterConfig {
            vnics: vec![
                VnicConfig {
                    mac: "02:00:00:00:10:00".into(),
                    ..VnicConfig::default()
                },
                VnicConfig {
                    mac: "02:00:00:00:10:01".into(),
                    ..VnicConfig::default()
                },
            ],
            nexthops: vec![NextHopConfig {
                vnic: 1,
                mac: mac(SINK_MAC),
                ..NextHopConfig::default()
            }],
            routes: self.routes.clone(),
            route_file: self.route_file.clone(),
            route_file_ipv6: self.family == Family::Ipv6,
            ..RouterConfig::default()
        }
    }
}

/// The tables of every `--routes` for every `--family` it has routes of,
/// families in the order given.
pub(super) fn load_tables(args: &MemoryArgs) -> Result<Vec<Table>> {
    let mut tables = Vec::new();
    for spec in &args.routes {
        let mut found = false;
        for &family in &args.family {
            if let Some(t) = Table::load_family(spec, family)? {
                tables.push(t);
                found = true;
            }
        }
        if !found {
            let families: Vec<&str> = args.family.iter().map(|f| f.name()).collect();
            bail!("route table {spec} has no {} routes", families.join(" or "));
        }
    }
    tables.sort_by_key(|t| args.family.iter().position(|&f| f == t.family));
    Ok(tables)
}
