//! The daemon's declarative configuration: ports, VRs and classifier rules.
//!
//! The whole file is parsed and checked before anything is applied; every
//! error names the file, the line and the field (`vrhost.toml:12:
//! vrs[0].vnics[1].port: no port "p9"`). A commented example is
//! `lab/default-vrhost.toml` in the repository.
//!
//! What a VR does with its config is the VR's business: for the built-in
//! router the daemon builds a [`RouterConfig`](vrhost_router::RouterConfig) from the VR's vNICs (MAC and
//! addresses) and its `[vrs.router]` table, and checks it by building the
//! router once; a custom program gets `[vrs.config]` as JSON in its hello.
//!
//! The parts: `schema` holds the TOML's serde types; the checks go by
//! table, `ports`, `tunnels`, `vrs` (with a VR's `instances`, `confinement` and
//! `sched` beside it) and `rules`; `control` adds the ports, vNICs and
//! rules of the VRs' control planes; `plan` is what a checked config
//! becomes. `Config::check` runs them in that order.

mod auto;
mod cluster;
mod cluster_etcd;
mod cluster_schema;
mod confinement;
mod control;
mod dedicated;
mod fast;
mod instances;
mod plan;
mod ports;
mod rules;
mod sched;
mod schema;
#[cfg(test)]
mod tests;
mod tunnels;
mod vrs;

use std::net::Ipv4Addr;
use std::path::Path;

pub use auto::{AutoConf, AutoPath};
pub use cluster::{ClusterPlan, HEARTBEAT_PORT};
pub use cluster_schema::{ClusterConf, EngineConf, RemoteVrConf};
pub use control::{
    CONTROL_HOLD_MS, CONTROL_NETNS_PREFIX, ControlPlan, ControlPlaneConf, ControlRun, ControlTap,
    control_netns, find_program, split_netns,
};
pub use fast::{DataPath, FAST_TUNNEL_VNICS, FastKey, PortLimit};
pub use plan::{Plan, VrPlan};
pub use schema::{
    Config, Driver, FastConf, GenConf, HostConf, PortConfig, PortRings, RuleConf, ScaleConf,
    TunnelConf, VnicConf, VrConf, VrKind,
};

use crate::classify::Classifier;

/// A config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{file}: {err}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        err: std::io::Error,
    },
    /// Not TOML, or not the schema (toml's message names line and column).
    #[error("{file}: {msg}")]
    Parse {
        /// The file.
        file: String,
        /// What is wrong.
        msg: String,
    },
    /// A field has a bad value.
    #[error("{file}:{line}: {field}: {msg}")]
    Field {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// Which field.
        field: String,
        /// What is wrong.
        msg: String,
    },
}

/// A config field at fault: where, which, why.
type FieldError = (std::ops::Range<usize>, &'static str, String);

/// The text a config came from and its name: what turns a span into the
/// `file:line: field: msg` of an error.
struct Source<'a> {
    src: &'a str,
    file: &'a str,
}

impl Source<'_> {
    /// The error of `field` at `span`.
    fn err(&self, span: std::ops::Range<usize>, field: String, msg: String) -> ConfigError {
        ConfigError::Field {
            file: self.file.to_string(),
            line: line_of(self.src, span.start),
            field,
            msg,
        }
    }
}

fn line_of(src: &str, at: usize) -> usize {
    src[..at.min(src.len())].matches('\n').count() + 1
}

fn parse_prefix(s: &str) -> Result<(Ipv4Addr, u8), String> {
    vrhost_router::parse_prefix(s).map(|(a, l)| (Ipv4Addr::from(a), l))
}

/// An IPv4 or an IPv6 prefix (by the `:` of IPv6 addresses).
fn parse_any_prefix(s: &str) -> Result<AnyPrefix, String> {
    if s.contains(':') {
        vrhost_router::parse_prefix6(s).map(|(a, l)| AnyPrefix::V6(std::net::Ipv6Addr::from(a), l))
    } else {
        parse_prefix(s).map(|(a, l)| AnyPrefix::V4(a, l))
    }
}

/// A prefix of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnyPrefix {
    V4(Ipv4Addr, u8),
    V6(std::net::Ipv6Addr, u8),
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    s.parse::<vrhost_packet::MacAddr>()
        .map(|m| m.0)
        .map_err(|e| format!("{s:?}: {e}"))
}

impl Config {
    /// Read and check a config file.
    ///
    /// # Errors
    /// [`ConfigError`] naming file, line and field.
    pub fn load(path: &Path) -> Result<(Self, Plan), ConfigError> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|err| ConfigError::Read {
            file: file.clone(),
            err,
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&src, &file, &dir)
    }

    /// Parse and check config TOML; `file` names it in errors, `dir`
    /// resolves relative paths.
    ///
    /// # Errors
    /// [`ConfigError`] naming file, line and field.
    pub fn parse(src: &str, file: &str, dir: &Path) -> Result<(Self, Plan), ConfigError> {
        let mut cfg: Config = toml::from_str(src).map_err(|e| ConfigError::Parse {
            file: file.to_string(),
            msg: e.to_string().trim_end().to_string(),
        })?;
        cfg.dir = dir.to_path_buf();
        let plan = cfg.check(src, file)?;
        Ok((cfg, plan))
    }

    /// `[host] hugepages = "required"` refuses a VR with a `memory` limit:
    /// huge pages are not charged to its memory cgroup.
    fn check_hugepages(&self, vrs: &[VrPlan], file: &str) -> Result<(), ConfigError> {
        let pages = self.host.hugepages;
        match vrs.iter().find(|v| v.confine.memory.is_some()) {
            Some(v) if !pages.allows_memory_limit() => Err(ConfigError::Field {
                file: file.into(),
                line: 0,
                field: "host.hugepages".into(),
                msg: format!(
                    "\"{pages}\" cannot honour VR {}'s memory limit: huge pages are charged \
                     to the hugetlb controller, not to its memory cgroup (use \"auto\", which \
                     keeps such a VR in ordinary pages)",
                    v.name
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Check the whole config, table by table, into the plan the daemon
    /// builds; the first error found stops it.
    fn check(&self, src: &str, file: &str) -> Result<Plan, ConfigError> {
        let at = Source { src, file };
        let port_ix = ports::check_ports(&self.ports, &at)?;
        let mut budget = instances::BudgetCheck::of_host(&self.host, &at)?;
        let tunnel_ix = tunnels::check_tunnels(&self.tunnels, &self.ports, &port_ix, &at)?;
        let mut vrs = self.check_vrs(&port_ix, &tunnel_ix, &mut budget, &at)?;
        self.check_hugepages(&vrs, file)?;
        let tunnel_table = tunnels::tunnel_table(&vrs, &self.vrs, &at)?;
        let rules = rules::check_rules(&self.rules, &port_ix, &vrs, &at)?;
        fast::check_fast(self, &mut vrs, &rules, &at)?;
        let dedicated =
            dedicated::check_dedicated(&self.ports, &vrs, &rules, self.host.fast_path, &at)?;
        // The control planes' ports and rules, after the config's checks
        // (a rule of the config cannot name a control vNIC).
        let (ctl_ports, mut all) = control::expand(&mut vrs, self.ports.len());
        all.extend(rules);
        let mut classifier = Classifier::new(&all).map_err(|e| ConfigError::Field {
            file: file.into(),
            line: 0,
            field: "rules".into(),
            msg: e.to_string(),
        })?;
        classifier.set_tunnels(tunnel_table);
        let cluster = self
            .cluster
            .as_ref()
            .map(|c| {
                let cx = cluster::Ctx {
                    ports: &self.ports,
                    port_ix: &port_ix,
                    tunnels: &self.tunnels,
                    vrs: &vrs,
                };
                cluster::check_cluster(c, &cx, &at)
            })
            .transpose()?;
        let mut plan = Plan::new(self, vrs, classifier, ctl_ports);
        plan.cluster = cluster;
        plan.dedicated[..dedicated.len()].copy_from_slice(&dedicated);
        Ok(plan)
    }
}
