//! Lab topologies: hosts (network namespaces) joined by links (veth pairs),
//! described in TOML, brought up and down as a whole.
//!
//! ```toml
//! prefix = "vrh"                     # namespaces are named PREFIX-HOST
//!
//! [[hosts]]
//! name = "gen"
//! routes = ["10.1.1.0/24 via 10.1.0.1"]
//! sysctls = { "net.ipv4.ip_forward" = "0" }
//!
//! [[hosts]]
//! name = "node"
//! vrhost = "default-vrhost.toml"     # vrhost runs here (path relative to this file)
//!
//! [[links]]
//! a = { host = "gen", iface = "eth0", mac = "02:00:00:00:00:02", addrs = ["10.1.0.2/24"] }
//! b = { host = "node", iface = "p0", mac = "02:00:00:00:01:01" }
//! offloads = false                   # TSO/GSO/GRO off on both ends
//!
//! [etcd]                             # optional: `vrhost lab run` starts
//! host = "node"                      # an etcd in this host, listening on
//! address = "10.1.0.1"               # this address of it (port 2379)
//! ```
//!
//! The whole file is checked before anything is created; an error names the
//! line and field. `up` is idempotent: a lab whose namespaces and links all
//! exist is left alone; a partial one (a crash halfway) is removed and built
//! again; a failure while building removes everything built so far.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::netns::{CmdError, Netns, veth};

/// A lab file that cannot be used, or a step that failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The file cannot be read.
    #[error("{file}: {err}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        err: std::io::Error,
    },
    /// The file is not valid TOML or does not fit the schema.
    #[error("{file}: {msg}")]
    Parse {
        /// The file.
        file: String,
        /// toml's message (it names line and column).
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
    /// Building the lab failed (everything built was removed).
    #[error("lab {lab}: {step}: {err}")]
    Step {
        /// The lab's prefix.
        lab: String,
        /// What was being done.
        step: String,
        /// The failing command.
        err: CmdError,
    },
    /// The lab's claim file cannot be opened or locked.
    #[error("lab {lab}: claim {path}: {err}")]
    Claim {
        /// The lab's prefix.
        lab: String,
        /// The claim file.
        path: String,
        /// Why.
        err: std::io::Error,
    },
}

/// One end of a link.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct End {
    /// Host name.
    pub host: Spanned<String>,
    /// Interface name in that host (at most 15 bytes).
    pub iface: Spanned<String>,
    /// MAC address (random if absent).
    #[serde(default)]
    pub mac: Option<Spanned<String>>,
    /// IPv4 addresses `A.B.C.D/LEN`.
    #[serde(default)]
    pub addrs: Vec<Spanned<String>>,
}

/// A veth pair between two hosts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// One end.
    pub a: End,
    /// The other end.
    pub b: End,
    /// Leave TSO/GSO/GRO and checksum offloads on (default: off, so frames
    /// are never larger than the MTU; see BENCHMARKING.md).
    #[serde(default)]
    pub offloads: bool,
}

/// A permanent neighbour entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neighbour {
    /// IPv4 address.
    pub ip: Spanned<String>,
    /// Its MAC.
    pub mac: Spanned<String>,
    /// Interface.
    pub dev: Spanned<String>,
}

/// A network namespace.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Name (the namespace is `PREFIX-NAME`).
    pub name: Spanned<String>,
    /// Routes, as `ip route add` arguments: `PREFIX via ADDR [dev IF]`.
    #[serde(default)]
    pub routes: Vec<Spanned<String>>,
    /// sysctls written after the links are up.
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// Permanent neighbour entries.
    #[serde(default)]
    pub neighbours: Vec<Neighbour>,
    /// The vrhost daemon config for this host, relative to the lab file:
    /// this host is the vrhost node.
    #[serde(default)]
    pub vrhost: Option<String>,
}

/// Traffic `vrhost lab run` sends to show the lab forwarding: ping, then
/// an iperf3 TCP test, from one host to an address of another.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    /// What it shows (a tenant's name).
    pub name: String,
    /// Sending host.
    pub from: Spanned<String>,
    /// Receiving host (runs the iperf3 server).
    pub to_host: Spanned<String>,
    /// Address of the receiving host.
    pub to: Spanned<String>,
}

/// `[etcd]`: an etcd server (Debian's `etcd-server`) on one host of the
/// lab, listening on one of its addresses (port 2379).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdConf {
    /// The host it runs in.
    pub host: Spanned<String>,
    /// The address it listens on (one of the host's).
    pub address: Spanned<String>,
}

/// A lab: hosts and links.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lab {
    /// Namespace name prefix.
    pub prefix: String,
    /// Hosts.
    #[serde(default)]
    pub hosts: Vec<Host>,
    /// Links.
    #[serde(default)]
    pub links: Vec<Link>,
    /// Traffic shown by `vrhost lab run`.
    #[serde(default)]
    pub flows: Vec<Flow>,
    /// An etcd `vrhost lab run` starts before the vrhosts (a cluster's
    /// desired state, `docs/cluster.md`).
    #[serde(default)]
    pub etcd: Option<EtcdConf>,
    /// Where the file was read from (for relative paths).
    #[serde(skip)]
    pub dir: PathBuf,
}

/// What `up` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Up {
    /// Everything was already there.
    AlreadyUp,
    /// Built from scratch (after removing a partial lab, if any).
    Built,
}

/// Where a lab file's errors point: its text (for line numbers) and name.
struct At<'a> {
    src: &'a str,
    file: &'a str,
}

impl At<'_> {
    /// The error for `field` at byte range `s` of the file.
    fn err(&self, s: std::ops::Range<usize>, field: &str, msg: String) -> LabError {
        LabError::Field {
            file: self.file.to_string(),
            line: line_of(self.src, s.start),
            field: field.to_string(),
            msg,
        }
    }
}

fn line_of(src: &str, at: usize) -> usize {
    src[..at.min(src.len())].matches('\n').count() + 1
}

fn parse_v4_prefix(s: &str) -> Result<(), String> {
    let (a, l) = s.split_once('/').ok_or("expected A.B.C.D/LEN")?;
    a.parse::<Ipv4Addr>()
        .map_err(|_| format!("bad address {a:?}"))?;
    match l.parse::<u8>() {
        Ok(l) if l <= 32 => Ok(()),
        _ => Err(format!("bad prefix length {l:?}")),
    }
}

fn check_mac(s: &str) -> Result<(), String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && u8::from_str_radix(p, 16).is_ok())
    {
        Ok(())
    } else {
        Err(format!("bad MAC address {s:?}"))
    }
}

impl Lab {
    /// Read and check a lab file.
    ///
    /// # Errors
    /// [`LabError`] naming the file, line and field.
    pub fn load(path: &Path) -> Result<Self, LabError> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|err| LabError::Read {
            file: file.clone(),
            err,
        })?;
        let mut lab = Self::parse(&src, &file)?;
        lab.dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(lab)
    }

    /// Parse and check lab TOML; `file` names it in errors.
    ///
    /// # Errors
    /// [`LabError`] naming the line and field.
    pub fn parse(src: &str, file: &str) -> Result<Self, LabError> {
        let lab: Lab = toml::from_str(src).map_err(|e| LabError::Parse {
            file: file.to_string(),
            msg: e.to_string().trim_end().to_string(),
        })?;
        let at = At { src, file };
        lab.check_prefix(file)?;
        let names = lab.check_hosts(&at)?;
        let ifaces = lab.check_links(&at, &names)?;
        lab.check_flows(&at, &names)?;
        lab.check_etcd(&at, &names)?;
        lab.check_neighbour_devs(&at, &ifaces)?;
        Ok(lab)
    }

    /// The namespace prefix: 1-12 letters, digits or '-'.
    fn check_prefix(&self, file: &str) -> Result<(), LabError> {
        let p = &self.prefix;
        if p.is_empty() || p.len() > 12 || !p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(LabError::Field {
                file: file.into(),
                line: 1,
                field: "prefix".into(),
                msg: format!("{p:?}: 1-12 letters, digits or '-'"),
            });
        }
        Ok(())
    }

    /// Hosts: names, routes, neighbours' addresses; returns each name's
    /// position.
    fn check_hosts(&self, at: &At) -> Result<BTreeMap<String, usize>, LabError> {
        let mut names = BTreeMap::new();
        for (i, h) in self.hosts.iter().enumerate() {
            let n = h.name.get_ref();
            if n.is_empty() || n.len() > 16 || !n.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(at.err(
                    h.name.span(),
                    &format!("hosts[{i}].name"),
                    format!("{n:?}: 1-16 letters or digits"),
                ));
            }
            if names.insert(n.clone(), i).is_some() {
                return Err(at.err(
                    h.name.span(),
                    &format!("hosts[{i}].name"),
                    format!("host {n:?} defined twice"),
                ));
            }
            for (j, r) in h.routes.iter().enumerate() {
                let first = r.get_ref().split_whitespace().next().unwrap_or("");
                if first != "default" {
                    parse_v4_prefix(first)
                        .map_err(|m| at.err(r.span(), &format!("hosts[{i}].routes[{j}]"), m))?;
                }
            }
            for (j, nb) in h.neighbours.iter().enumerate() {
                nb.ip.get_ref().parse::<Ipv4Addr>().map_err(|_| {
                    at.err(
                        nb.ip.span(),
                        &format!("hosts[{i}].neighbours[{j}].ip"),
                        format!("bad address {:?}", nb.ip.get_ref()),
                    )
                })?;
                check_mac(nb.mac.get_ref()).map_err(|m| {
                    at.err(nb.mac.span(), &format!("hosts[{i}].neighbours[{j}].mac"), m)
                })?;
            }
        }
        Ok(names)
    }

    /// Links: both ends on known hosts, interface names unique per host,
    /// MACs and addresses; returns the (host, interface) pairs.
    fn check_links(
        &self,
        at: &At,
        names: &BTreeMap<String, usize>,
    ) -> Result<BTreeMap<(String, String), usize>, LabError> {
        let mut ifaces = BTreeMap::new();
        for (i, l) in self.links.iter().enumerate() {
            for (side, e) in [("a", &l.a), ("b", &l.b)] {
                let f = |x: &str| format!("links[{i}].{side}.{x}");
                if !names.contains_key(e.host.get_ref()) {
                    return Err(at.err(
                        e.host.span(),
                        &f("host"),
                        format!("no host {:?}", e.host.get_ref()),
                    ));
                }
                let ifn = e.iface.get_ref();
                if ifn.is_empty() || ifn.len() > 15 || ifn.contains(['/', ' ', ':']) || ifn == "lo"
                {
                    return Err(at.err(
                        e.iface.span(),
                        &f("iface"),
                        format!("{ifn:?}: 1-15 characters, no '/', ':' or space"),
                    ));
                }
                if ifaces
                    .insert((e.host.get_ref().clone(), ifn.clone()), i)
                    .is_some()
                {
                    return Err(at.err(
                        e.iface.span(),
                        &f("iface"),
                        format!("{ifn:?} used twice on host {:?}", e.host.get_ref()),
                    ));
                }
                if let Some(m) = &e.mac {
                    check_mac(m.get_ref()).map_err(|msg| at.err(m.span(), &f("mac"), msg))?;
                }
                for (j, a) in e.addrs.iter().enumerate() {
                    parse_v4_prefix(a.get_ref())
                        .map_err(|m| at.err(a.span(), &f(&format!("addrs[{j}]")), m))?;
                }
            }
        }
        Ok(ifaces)
    }

    /// Flows: between known hosts, to an address.
    fn check_flows(&self, at: &At, names: &BTreeMap<String, usize>) -> Result<(), LabError> {
        for (i, fl) in self.flows.iter().enumerate() {
            for (name, h) in [("from", &fl.from), ("to_host", &fl.to_host)] {
                if !names.contains_key(h.get_ref()) {
                    return Err(at.err(
                        h.span(),
                        &format!("flows[{i}].{name}"),
                        format!("no host {:?}", h.get_ref()),
                    ));
                }
            }
            fl.to.get_ref().parse::<Ipv4Addr>().map_err(|_| {
                at.err(
                    fl.to.span(),
                    &format!("flows[{i}].to"),
                    format!("bad address {:?}", fl.to.get_ref()),
                )
            })?;
        }
        Ok(())
    }

    /// `[etcd]`'s host exists and its address is an IPv4 address.
    fn check_etcd(&self, at: &At, names: &BTreeMap<String, usize>) -> Result<(), LabError> {
        let Some(e) = &self.etcd else {
            return Ok(());
        };
        if !names.contains_key(e.host.get_ref()) {
            let msg = format!("no host {:?}", e.host.get_ref());
            return Err(at.err(e.host.span(), "etcd.host", msg));
        }
        match e.address.get_ref().parse::<Ipv4Addr>() {
            Ok(_) => Ok(()),
            Err(_) => {
                let msg = format!("bad address {:?}", e.address.get_ref());
                Err(at.err(e.address.span(), "etcd.address", msg))
            }
        }
    }

    /// A host's neighbours are reached through one of its interfaces.
    fn check_neighbour_devs(
        &self,
        at: &At,
        ifaces: &BTreeMap<(String, String), usize>,
    ) -> Result<(), LabError> {
        for (i, h) in self.hosts.iter().enumerate() {
            for (j, nb) in h.neighbours.iter().enumerate() {
                if !ifaces.contains_key(&(h.name.get_ref().clone(), nb.dev.get_ref().clone())) {
                    return Err(at.err(
                        nb.dev.span(),
                        &format!("hosts[{i}].neighbours[{j}].dev"),
                        format!("host has no interface {:?}", nb.dev.get_ref()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The namespace name of host `host`.
    pub fn ns_name(&self, host: &str) -> String {
        format!("{}-{host}", self.prefix)
    }

    /// A handle on host `host`'s namespace (not owned).
    pub fn ns(&self, host: &str) -> Netns {
        Netns::existing(&self.ns_name(host))
    }

    /// The host that runs vrhost and its config path, if any (the first,
    /// when several do).
    pub fn vrhost_node(&self) -> Option<(&str, PathBuf)> {
        self.vrhost_nodes().into_iter().next()
    }

    /// Every host that runs vrhost, with its config path, in file order
    /// (a cluster: a dispatcher and its engines).
    pub fn vrhost_nodes(&self) -> Vec<(&str, PathBuf)> {
        self.hosts
            .iter()
            .filter_map(|h| {
                h.vrhost
                    .as_ref()
                    .map(|c| (h.name.get_ref().as_str(), self.dir.join(c)))
            })
            .collect()
    }

    /// Whether every namespace and link of the lab exists.
    pub fn is_up(&self) -> bool {
        self.hosts
            .iter()
            .all(|h| Netns::exists(&self.ns_name(h.name.get_ref())))
            && self.links.iter().all(|l| {
                [&l.a, &l.b].iter().all(|e| {
                    self.ns(e.host.get_ref())
                        .ip(&["link", "show", "dev", e.iface.get_ref()])
                        .is_ok()
                })
            })
    }

    /// Bring the lab up (see the module doc for idempotence).
    ///
    /// # Errors
    /// [`LabError::Step`] naming the step; nothing of the lab is left.
    pub fn up(&self) -> Result<Up, LabError> {
        if self.is_up() {
            return Ok(Up::AlreadyUp);
        }
        self.down();
        let step = |step: String| {
            let lab = self.prefix.clone();
            move |err| LabError::Step { lab, step, err }
        };
        // Owned handles: if anything below fails they are dropped, and the
        // namespaces (with every veth in them) go with them.
        let mut nss = BTreeMap::new();
        for h in &self.hosts {
            let name = h.name.get_ref();
            let ns = Netns::create(&self.ns_name(name))
                .map_err(step(format!("create namespace for host {name}")))?;
            nss.insert(name.clone(), ns);
        }
        for (i, l) in self.links.iter().enumerate() {
            let (a, b) = (&nss[l.a.host.get_ref()], &nss[l.b.host.get_ref()]);
            veth(
                a,
                l.a.iface.get_ref(),
                l.a.mac.as_ref().map(|m| m.get_ref().as_str()),
                b,
                l.b.iface.get_ref(),
                l.b.mac.as_ref().map(|m| m.get_ref().as_str()),
            )
            .map_err(step(format!("links[{i}]: veth")))?;
            for (e, ns) in [(&l.a, a), (&l.b, b)] {
                let dev = e.iface.get_ref();
                for ad in &e.addrs {
                    ns.ip(&["addr", "add", ad.get_ref(), "dev", dev])
                        .map_err(step(format!("links[{i}]: address on {dev}")))?;
                }
                if !l.offloads {
                    ns.exec(
                        "ethtool",
                        &[
                            "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx",
                            "off",
                        ],
                    )
                    .map_err(step(format!("links[{i}]: offloads off on {dev}")))?;
                }
            }
        }
        for h in &self.hosts {
            let ns = &nss[h.name.get_ref()];
            for (k, v) in &h.sysctls {
                ns.sysctl(k, v)
                    .map_err(step(format!("host {}: sysctl {k}", h.name.get_ref())))?;
            }
            for r in &h.routes {
                let mut args = vec!["route", "add"];
                args.extend(r.get_ref().split_whitespace());
                ns.ip(&args).map_err(step(format!(
                    "host {}: route {}",
                    h.name.get_ref(),
                    r.get_ref()
                )))?;
            }
            for nb in &h.neighbours {
                ns.ip(&[
                    "neigh",
                    "replace",
                    nb.ip.get_ref(),
                    "lladdr",
                    nb.mac.get_ref(),
                    "dev",
                    nb.dev.get_ref(),
                    "nud",
                    "permanent",
                ])
                .map_err(step(format!(
                    "host {}: neighbour {}",
                    h.name.get_ref(),
                    nb.ip.get_ref()
                )))?;
            }
        }
        for (_, ns) in nss {
            ns.leak();
        }
        Ok(Up::Built)
    }

    /// Remove every namespace of the lab that exists; returns how many.
    pub fn down(&self) -> usize {
        let mut n = 0;
        for h in &self.hosts {
            let name = self.ns_name(h.name.get_ref());
            if Netns::exists(&name) && Netns::delete(&name).is_ok() {
                n += 1;
            }
        }
        n
    }

    /// One line per host: whether its namespace exists, and per interface
    /// its state, addresses and packet counters.
    pub fn status(&self) -> Vec<String> {
        let mut out = Vec::new();
        for h in &self.hosts {
            let name = h.name.get_ref();
            let ns = self.ns(name);
            if !Netns::exists(ns.name()) {
                out.push(format!("{name:<8} ({}) down", ns.name()));
                continue;
            }
            let role = if h.vrhost.is_some() {
                " [vrhost node]"
            } else {
                ""
            };
            out.push(format!("{name:<8} ({}) up{role}", ns.name()));
            for l in &self.links {
                for e in [&l.a, &l.b] {
                    if e.host.get_ref() != name {
                        continue;
                    }
                    let dev = e.iface.get_ref();
                    let brief = ns
                        .ip(&["-br", "addr", "show", "dev", dev])
                        .map(|s| s.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
                        .unwrap_or_else(|e| format!("missing ({e})"));
                    let stat = |k: &str| {
                        ns.exec("cat", &[&format!("/sys/class/net/{dev}/statistics/{k}")])
                            .ok()
                            .and_then(|s| s.trim().parse::<u64>().ok())
                            .unwrap_or(0)
                    };
                    out.push(format!(
                        "  {dev:<8} {brief:<40} rx {:>10} tx {:>10} pkts",
                        stat("rx_packets"),
                        stat("tx_packets")
                    ));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
prefix = "vrt"
[[hosts]]
name = "a"
routes = ["10.8.1.0/24 via 10.8.0.1"]
[[hosts]]
name = "b"
sysctls = { "net.ipv4.ip_forward" = "1" }
[[hosts]]
name = "c"
routes = ["10.8.0.0/24 via 10.8.1.1"]
neighbours = [{ ip = "10.8.1.1", mac = "02:00:00:00:08:11", dev = "c0" }]
[[links]]
a = { host = "a", iface = "a0", addrs = ["10.8.0.2/24"] }
b = { host = "b", iface = "b0", mac = "02:00:00:00:08:01", addrs = ["10.8.0.1/24"] }
[[links]]
a = { host = "b", iface = "b1", mac = "02:00:00:00:08:11", addrs = ["10.8.1.1/24"] }
b = { host = "c", iface = "c0", addrs = ["10.8.1.2/24"] }
"#;

    fn field_err(src: &str) -> String {
        Lab::parse(src, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn an_etcd_names_a_host_and_one_of_its_addresses() {
        let lab = Lab::parse(
            &format!("{GOOD}[etcd]\nhost = \"b\"\naddress = \"10.8.0.1\"\n"),
            "t.toml",
        )
        .unwrap();
        assert_eq!(lab.etcd.unwrap().host.get_ref(), "b");
        let e = field_err(&format!(
            "{GOOD}[etcd]\nhost = \"x\"\naddress = \"10.8.0.1\"\n"
        ));
        assert!(e.contains("etcd.host") && e.contains("no host"), "{e}");
        let e = field_err(&format!(
            "{GOOD}[etcd]\nhost = \"b\"\naddress = \"10.8.0\"\n"
        ));
        assert!(e.contains("etcd.address"), "{e}");
    }

    #[test]
    fn errors_name_line_and_field() {
        let bad_host = GOOD.replace("host = \"c\", iface", "host = \"x\", iface");
        let e = field_err(&bad_host);
        assert!(e.starts_with("t.toml:18: links[1].b.host"), "{e}");
        let bad_addr = GOOD.replace("10.8.0.2/24", "10.8.0.2/33");
        let e = field_err(&bad_addr);
        assert!(e.contains("t.toml:14: links[0].a.addrs[0]"), "{e}");
        let e = field_err(&GOOD.replace("routes = [\"10.8.1.0/24", "routes = [\"10.8.1/24"));
        assert!(e.contains("t.toml:5: hosts[0].routes[0]"), "{e}");
        let e = field_err(&GOOD.replace("dev = \"c0\"", "dev = \"c9\""));
        assert!(e.contains("hosts[2].neighbours[0].dev"), "{e}");
        let e = field_err(&GOOD.replace("iface = \"b1\"", "iface = \"b0\""));
        assert!(e.contains("used twice"), "{e}");
        let e = field_err(&GOOD.replace("name = \"b\"", "name = \"a\""));
        assert!(e.contains("defined twice"), "{e}");
        let e = field_err(&GOOD.replace("prefix = \"vrt\"", "prefix = \"v/t\""));
        assert!(e.starts_with("t.toml:1: prefix"), "{e}");
        let e = field_err(&GOOD.replace("mac = \"02:00:00:00:08:01\"", "mac = \"02:00\""));
        assert!(e.contains("links[0].b.mac"), "{e}");
        let e = field_err(&format!("{GOOD}\nbogus = 1\n"));
        assert!(e.contains("unknown field") && e.contains("line"), "{e}");
    }

    #[test]
    fn up_is_idempotent_down_removes_everything() {
        let src = GOOD.replace("vrt", &format!("vrt{}", std::process::id() % 100_000));
        let lab = Lab::parse(&src, "t.toml").unwrap();
        lab.down();
        assert_eq!(lab.up().unwrap(), Up::Built);
        assert_eq!(lab.up().unwrap(), Up::AlreadyUp);
        // Routed through b's kernel.
        let out = lab.ns("a").exec("ping", &["-c1", "-W2", "10.8.1.2"]);
        let status = lab.status().join("\n");
        assert!(
            status.contains("a0") && status.contains("10.8.0.2/24"),
            "{status}"
        );
        // A half-removed lab is rebuilt.
        lab.ns("c").ip(&["link", "del", "c0"]).unwrap();
        assert!(!lab.is_up());
        assert_eq!(lab.up().unwrap(), Up::Built);
        assert_eq!(lab.down(), 3);
        assert!(!lab.is_up());
        assert!(out.unwrap().contains("1 received"));
    }

    #[test]
    fn a_failed_up_leaves_nothing() {
        // The route's gateway is not on any link: `ip route add` fails after
        // the namespaces and veths exist.
        let src = GOOD
            .replace("vrt", &format!("vrf{}", std::process::id() % 100_000))
            .replace("10.8.1.0/24 via 10.8.0.1", "10.8.1.0/24 via 10.99.0.1");
        let lab = Lab::parse(&src, "t.toml").unwrap();
        let e = lab.up().unwrap_err().to_string();
        assert!(e.contains("host a: route 10.8.1.0/24 via 10.99.0.1"), "{e}");
        for h in ["a", "b", "c"] {
            assert!(!Netns::exists(&lab.ns_name(h)), "{h} left behind");
        }
    }
}
