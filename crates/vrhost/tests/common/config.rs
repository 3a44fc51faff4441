//! The daemon configs of the tests, built from typed parts and written as
//! TOML in one place. A VR is the API's own [`VrSpec`] (the `[[vrs]]`
//! table of the config file and the file of `vrhost vr add`); ports, the
//! host table and the document around them are small types here, as the
//! host's config types only deserialize.
//!
//! The usual lab: a `mem` generator port `gen` and a `null` port `out`;
//! each VR on network `N` has vNIC 0 on `gen` (10.N.0.1/24) and vNIC 1 on
//! `out`, a rule sending `gen`'s frames for 10.N.0.0/16 to it, and the
//! generator sends to 10.N.128.0/17, the upper half of its network.

use serde::Serialize;
use serde_json::{Value, json};
use vrhost_api::{Rule, Vnic, VrSpec};

/// A daemon's config file.
#[derive(Debug, Clone, Serialize)]
pub struct Lab {
    /// `[host]`.
    #[serde(skip_serializing_if = "Host::is_empty")]
    pub host: Host,
    /// `[[ports]]`: `gen`, then `out`.
    pub ports: Vec<Port>,
    /// `[[vrs]]`.
    pub vrs: Vec<VrSpec>,
    /// `[[rules]]`.
    pub rules: Vec<Rule>,
}

/// The `[host]` table (only the keys the tests set).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Host {
    /// Milliseconds without a heartbeat before a VR is killed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watchdog_ms: Option<u64>,
    /// The host worker's core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
}

impl Host {
    fn is_empty(&self) -> bool {
        self.watchdog_ms.is_none() && self.cpu.is_none()
    }
}

/// A `[[ports]]` table.
#[derive(Debug, Clone, Serialize)]
pub struct Port {
    /// Its name.
    pub name: String,
    /// `mem` or `null`.
    pub driver: String,
    /// A `mem` port's generator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
}

/// A `mem` port's `[ports.traffic]`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Traffic {
    /// Destination prefixes.
    pub dst: Vec<String>,
    /// Frames per second (none: as fast as the worker takes them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pps: Option<u64>,
    /// Frames in all (none: no end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

impl Lab {
    /// The ports `gen` (sending to no one yet, unpaced, without end) and
    /// `out`, and no VR.
    pub fn ports() -> Self {
        Self {
            host: Host::default(),
            ports: vec![
                Port {
                    name: "gen".into(),
                    driver: "mem".into(),
                    traffic: Some(Traffic::default()),
                },
                Port {
                    name: "out".into(),
                    driver: "null".into(),
                    traffic: None,
                },
            ],
            vrs: Vec::new(),
            rules: Vec::new(),
        }
    }

    /// Router VR `a` on network 1.
    pub fn one_vr() -> Self {
        Self::ports().with_vr(Self::router("a", 1), 1)
    }

    /// Router VRs `a` on network 1 and `b` on network 2.
    pub fn two_vrs() -> Self {
        Self::one_vr().with_vr(Self::router("b", 2), 2)
    }

    /// `vr` added on network `net`: its rule, and the generator's frames to
    /// 10.`net`.128.0/17 (if they did not go there already).
    pub fn with_vr(mut self, vr: VrSpec, net: u8) -> Self {
        let dst = format!("10.{net}.128.0/17");
        if !self.traffic().dst.contains(&dst) {
            self.traffic().dst.push(dst);
        }
        self.rules.push(Rule {
            port: Some("gen".into()),
            dst: Some(format!("10.{net}.0.0/16")),
            vr: vr.name.clone(),
            ..Rule::default()
        });
        self.vrs.push(vr);
        self
    }

    /// `vr` added on network `net` with its rule, but no traffic: the
    /// generator's destinations stay as they are.
    pub fn with_quiet_vr(mut self, vr: VrSpec, net: u8) -> Self {
        self.rules.push(Rule {
            port: Some("gen".into()),
            dst: Some(format!("10.{net}.0.0/16")),
            vr: vr.name.clone(),
            ..Rule::default()
        });
        self.vrs.push(vr);
        self
    }

    /// Router VRs `vr1` .. `vrN` on networks 1 ..= `n`, each with a pool of
    /// `slots` (`None`: the daemon's default); the generator sends to the
    /// first `busy` of them only. Each has a memory limit of 64 MiB, and with it cgroups of its own.
    pub fn many_vrs(n: u8, busy: u8, slots: Option<u32>) -> Self {
        (1..=n).fold(Self::ports(), |lab, net| {
            let vr = VrSpec {
                slots,
                memory: Some(json!("64M")),
                ..Self::router(&format!("vr{net}"), net)
            };
            if net <= busy {
                lab.with_vr(vr, net)
            } else {
                lab.with_quiet_vr(vr, net)
            }
        })
    }

    /// VR `name` and its rules taken out (the generator's destinations
    /// stay).
    pub fn without_vr(mut self, name: &str) -> Self {
        self.vrs.retain(|v| v.name != name);
        self.rules.retain(|r| r.vr != name);
        self
    }

    /// VR `name` changed by `edit`.
    pub fn edit_vr(mut self, name: &str, edit: impl FnOnce(&mut VrSpec)) -> Self {
        let vr = self.vrs.iter_mut().find(|v| v.name == name);
        edit(vr.unwrap_or_else(|| panic!("no VR {name}")));
        self
    }

    /// The generator paced at `pps` frames/s.
    pub fn paced(mut self, pps: u64) -> Self {
        self.traffic().pps = Some(pps);
        self
    }

    /// The generator stopping after `frames` frames.
    pub fn limit(mut self, frames: u64) -> Self {
        self.traffic().limit = Some(frames);
        self
    }

    /// The host's watchdog at `ms` milliseconds (0: off).
    pub fn with_watchdog_ms(mut self, ms: u64) -> Self {
        self.host.watchdog_ms = Some(ms);
        self
    }

    /// The host worker on core `cpu`.
    pub fn with_host_cpu(mut self, cpu: u32) -> Self {
        self.host.cpu = Some(cpu);
        self
    }

    /// The config file's text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap()
    }

    fn traffic(&mut self) -> &mut Traffic {
        self.ports[0].traffic.as_mut().unwrap()
    }

    /// Router VR `name` on network `net` (see the module doc), 512 slots: its
    /// vNIC 1 is 10.9.`net`.1/24 on `out`, and its one route, 10.`net`.0.0/16,
    /// goes via 10.9.`net`.2. MACs: 02:00:00:0X:0V:01 for vNIC V, X =
    /// 9 + `net` (a: 0a, b: 0b); the next hop's 02:00:00:00:99:0(`net`+1).
    pub fn router(name: &str, net: u8) -> VrSpec {
        let x = 9 + net;
        VrSpec {
            name: name.into(),
            slots: Some(512),
            vnics: vec![
                Vnic {
                    port: "gen".into(),
                    mac: Some(format!("02:00:00:{x:02x}:00:01")),
                    addrs: vec![format!("10.{net}.0.1/24")],
                    ..Vnic::default()
                },
                Vnic {
                    port: "out".into(),
                    mac: Some(format!("02:00:00:{x:02x}:01:01")),
                    addrs: vec![format!("10.9.{net}.1/24")],
                    ..Vnic::default()
                },
            ],
            router: Some(json!({
                "routes": [{ "prefix": format!("10.{net}.0.0/16"), "via": format!("10.9.{net}.2") }],
                "neighbours": [{ "ip": format!("10.9.{net}.2"), "mac": format!("02:00:00:00:99:{:02x}", net + 1) }],
            })),
            ..VrSpec::default()
        }
    }

    /// A VR running `vrhost-testvr ARG` with vNICs on `gen` and `out`, and
    /// `config` as its own config.
    pub fn program(name: &str, arg: &str, slots: u32, config: Value) -> VrSpec {
        VrSpec {
            name: name.into(),
            kind: Some("program".into()),
            program: Some(super::testvr().display().to_string()),
            args: vec![arg.into()],
            slots: Some(slots),
            vnics: ["gen", "out"]
                .map(|port| Vnic {
                    port: port.into(),
                    ..Vnic::default()
                })
                .into(),
            config: Some(config),
            ..VrSpec::default()
        }
    }
}
