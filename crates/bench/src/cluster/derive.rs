//! The cluster lab's configs without etcd, for the experiments that do
//! not need it: the lab's engines get their VRs from etcd (the
//! dispatcher's `vr` tables, placed on them), so each engine's static
//! config is derived here as its agent would build it (its own config
//! with the fragment [`fragment`] makes for it, appended by [`merged`]),
//! and the etcd keys are taken out of every config.

use std::path::Path;

use vrhost_host::cluster::desired::{Assignment, fragment, merged};
use vrhost_host::config::{ClusterPlan, Config};

use crate::{Context, Result, bail};

/// `[cluster]` keys that only an engine with etcd has.
const ENGINE_ETCD_KEYS: [&str; 10] = [
    "etcd",
    "etcd_prefix",
    "lease_s",
    "name",
    "underlay",
    "local",
    "local_mac",
    "cores",
    "per_core_pps",
    "next_hop_mac",
];

/// `nodes` (the dispatcher first, then its engines: name and config, the
/// lab's, with etcd; `dir` resolves their relative paths) without etcd:
/// the dispatcher's remote VRs without `vr` tables, each engine running
/// the VRs of those tables that name it.
///
/// # Errors
/// A config that does not check, a dispatcher that is none, an engine
/// without etcd's advertisement.
pub(super) fn without_etcd(
    nodes: &[(String, toml::Table)],
    dir: &Path,
) -> Result<Vec<(String, toml::Table)>> {
    let plan = |name: &str, doc: &toml::Table| -> Result<Option<ClusterPlan>> {
        let src = toml::to_string(doc).context("a config")?;
        let (_, p) = Config::parse(&src, name, dir)?;
        Ok(p.cluster)
    };
    let Some(((dname, ddoc), engines)) = nodes.split_first() else {
        bail!("no dispatcher");
    };
    let Some(ClusterPlan::Dispatcher { spec, .. }) = plan(dname, ddoc)? else {
        bail!("{dname}: not a dispatcher");
    };
    let mut out = vec![(dname.clone(), static_dispatcher(ddoc))];
    for (name, doc) in engines {
        let Some(ClusterPlan::Engine {
            etcd: Some(etcd), ..
        }) = plan(name, doc)?
        else {
            bail!("{name}: not an engine with etcd");
        };
        let Some(ad) = etcd.engine else {
            bail!("{name}: no advertisement");
        };
        let mut base = doc.clone();
        if let Some(c) = base.get_mut("cluster").and_then(|c| c.as_table_mut()) {
            c.retain(|k, _| !ENGINE_ETCD_KEYS.contains(&k));
        }
        let mut placed = Vec::new();
        for vr in spec.vrs.iter().filter(|v| v.vr.is_some()) {
            if !vr.engines.iter().any(|&e| spec.engines[e].name == ad.name) {
                continue;
            }
            let frag = fragment(&spec, vr, &ad).context(name)?;
            placed.push(Assignment {
                id: vr.id,
                pps: 0.0,
                config: toml::to_string(&frag).context("a fragment")?,
            });
        }
        let doc = merged(&base, &placed).context(name)?;
        out.push((name.clone(), doc));
    }
    Ok(out)
}

/// The dispatcher's config without etcd and its remote VRs' `vr` tables.
fn static_dispatcher(doc: &toml::Table) -> toml::Table {
    let mut doc = doc.clone();
    if let Some(c) = doc.get_mut("cluster").and_then(|c| c.as_table_mut()) {
        for k in ["etcd", "etcd_prefix", "lease_s"] {
            c.remove(k);
        }
        let vrs = c.get_mut("vrs").and_then(|v| v.as_array_mut());
        for v in vrs.into_iter().flatten().filter_map(|v| v.as_table_mut()) {
            v.remove("vr");
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab's configs: the derived engines run VR r on tunnels whose
    /// VNIs are the tags of the dispatcher's ports, and no config has
    /// etcd.
    #[test]
    fn the_lab_s_engines_get_the_vr_their_placement_would_give() {
        let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab");
        let nodes: Vec<(String, toml::Table)> = ["dispatcher", "e1", "e2", "e3"]
            .iter()
            .map(|n| {
                let f = lab.join(format!("cluster-{n}.toml"));
                let doc = toml::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
                (n.to_string(), doc)
            })
            .collect();
        let out = without_etcd(&nodes, &lab).unwrap();
        assert_eq!(out.len(), 4);
        for (name, doc) in &out {
            let src = toml::to_string(doc).unwrap();
            assert!(!src.contains("etcd"), "{name}: {src}");
            let (_, p) = Config::parse(&src, name, &lab).unwrap();
            if name == "dispatcher" {
                continue;
            }
            assert_eq!(p.vrs.len(), 1, "{name}");
            assert_eq!(p.vrs[0].name, "r");
            let vnis: Vec<u32> = (p.vrs[0].vnic_tunnels.iter())
                .map(|t| t.unwrap().vni)
                .collect();
            assert_eq!(vnis, [7 << 16, 7 << 16 | 1 << 8], "{name}");
        }
    }
}
