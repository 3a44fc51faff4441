use super::*;
use crate::cluster::ClusterPolicy;
use crate::cluster::dispatch::{EngineLink, placement_of};

pub(crate) fn ad(name: &str, last: u8) -> EngineAd {
    EngineAd {
        name: name.into(),
        underlay: "under".into(),
        address: Ipv4Addr::new(10, 9, 0, last),
        cores: 2,
        per_core_pps: 50_000,
        next_hop_mac: None,
        local_mac: None,
        heartbeat_port: None,
        measured: false,
    }
}

pub(crate) fn spec(rate: Option<f64>) -> DispatchSpec {
    let vr: toml::Table = toml::from_str(
        r#"
vnics = [{ mac = "02:00:00:00:01:00" }, { mac = "02:00:00:00:01:01" }]
[router]
routes = []
"#,
    )
    .unwrap();
    let engine = |n: &str, last: u8| EngineLink {
        name: n.into(),
        remote: Ipv4Addr::new(10, 9, 0, last),
        udp_port: 4789,
        remote_mac: None,
        capacity: 100_000,
    };
    DispatchSpec {
        underlay: 2,
        local: Ipv4Addr::new(10, 9, 0, 1),
        local_mac: [2, 0, 0, 0, 9, 1],
        engines: vec![engine("e1", 11), engine("e2", 12)],
        vrs: vec![RemoteVr {
            name: "r".into(),
            id: 7,
            ports: vec![0, 1],
            engines: vec![0, 1],
            policy: ClusterPolicy::Flow,
            rate,
            vr: Some(vr),
        }],
    }
}

#[test]
fn a_fragment_binds_each_vnic_to_a_tunnel_with_its_port_s_tag() {
    let s = spec(None);
    let doc = fragment(&s, &s.vrs[0], &ad("e1", 11)).unwrap();
    let tunnels = doc["tunnels"].as_array().unwrap();
    assert_eq!(tunnels.len(), 2);
    assert_eq!(tunnels[0]["vni"].as_integer(), Some(7 << 16));
    assert_eq!(tunnels[1]["vni"].as_integer(), Some(7 << 16 | 1 << 8));
    assert_eq!(tunnels[1]["local"].as_str(), Some("10.9.0.11"));
    assert_eq!(tunnels[1]["remote"].as_str(), Some("10.9.0.1"));
    assert_eq!(tunnels[1]["remote_mac"].as_str(), Some("02:00:00:00:09:01"));
    let vr = &doc["vrs"].as_array().unwrap()[0];
    assert_eq!(vr["name"].as_str(), Some("r"));
    assert_eq!(vr["vnics"][1]["tunnel"].as_str(), Some("c7p1"));
    assert_eq!(vr["vnics"][1]["mac"].as_str(), Some("02:00:00:00:01:01"));
    // Behind a router: the tunnels send to the engine's next hop.
    let mut routed = ad("e1", 11);
    routed.next_hop_mac = Some("02:00:00:00:09:fe".into());
    let doc = fragment(&s, &s.vrs[0], &routed).unwrap();
    assert_eq!(
        doc["tunnels"][0]["remote_mac"].as_str(),
        Some("02:00:00:00:09:fe")
    );
    // A VR whose vNICs do not match its ports is refused.
    let mut bad = s.clone();
    bad.vrs[0].ports.push(3);
    assert!(fragment(&bad, &bad.vrs[0], &ad("e1", 11)).is_err());
}

#[test]
fn assignments_follow_the_placement_and_only_registered_engines_get_any() {
    // 150 kpps on two engines of 100 kpps: a whole engine and a slice.
    let s = spec(Some(150_000.0));
    let placed = placement_of(&s, 0b11);
    let a = assignments(&s, &placed, &[Some(ad("e1", 11)), Some(ad("e2", 12))]);
    let pps: Vec<(String, f64)> = a.iter().map(|(k, v)| (k.0.clone(), v.pps)).collect();
    assert_eq!(pps, [("e1".into(), 100_000.0), ("e2".into(), 50_000.0)]);
    // e2 not registered: nothing for it.
    let a = assignments(&s, &placed, &[Some(ad("e1", 11)), None]);
    assert_eq!(a.len(), 1);
    // Merged into an engine's config: after its own tunnels and VRs.
    let base: toml::Table = toml::from_str("[[vrs]]\nname = \"local\"\n").unwrap();
    let one: Vec<Assignment> = a.into_values().collect();
    let doc = merged(&base, &one).unwrap();
    let vrs = doc["vrs"].as_array().unwrap();
    assert_eq!(vrs.len(), 2);
    assert_eq!(vrs[1]["name"].as_str(), Some("r"));
    assert_eq!(doc["tunnels"].as_array().unwrap().len(), 2);
    // A fragment that is no TOML is an error, not a panic.
    let junk = Assignment {
        id: 1,
        pps: 0.0,
        config: "[[[".into(),
    };
    assert!(merged(&base, &[junk]).is_err());
}

#[test]
fn keys_live_under_the_prefix() {
    let k = Keys::new("/vrhost/lab/");
    assert_eq!(k.engine("e1"), "/vrhost/lab/engines/e1");
    assert_eq!(k.placements("e1"), "/vrhost/lab/placements/e1/");
    assert_eq!(k.dispatcher(), "/vrhost/lab/dispatcher");
    assert_eq!(k.vrs(), "/vrhost/lab/vrs/");
}
