//! Whole configs through `Config::parse`: a good one planned, and errors
//! naming file, line and field; and what the per-table tests share.

use super::*;
use crate::confine::Confine;

#[test]
fn a_router_table_written_with_headers_reads_back() {
    // What the API writes: `[[vrs.router.neighbours]]` headers.
    let (cfg, _) = Config::parse(GOOD, "v.toml", Path::new(".")).unwrap();
    let _ = cfg;
    let mut doc: toml::Table = toml::from_str(GOOD).unwrap();
    let vr = doc["vrs"].as_array_mut().unwrap()[0]
        .as_table_mut()
        .unwrap();
    let router = vr["router"].as_table_mut().unwrap();
    router.insert(
        "neighbours".into(),
        toml::Value::Array(vec![toml::Value::Table(
            toml::from_str("ip = \"10.9.9.9\"\nmac = \"02:00:00:00:09:09\"\nvnic = 1").unwrap(),
        )]),
    );
    let src = toml::to_string(&doc).unwrap();
    assert!(src.contains("[[vrs.router.neighbours]]"), "{src}");
    Config::parse(&src, "v.toml", Path::new(".")).unwrap();
}

pub(super) const GOOD: &str = r#"
[host]
cpu = 0

[[ports]]
name = "p0"
driver = "af_packet"
interface = "veth0"

[[ports]]
name = "p1"
driver = "af_xdp"
interface = "veth1"

[[vrs]]
name = "tenant-a"
slots = 1024
vnics = [
  { port = "p0", mac = "02:00:00:00:01:01" },
  { port = "p1", mac = "02:00:00:00:01:02" },
]
[vrs.router]
nexthops = [{ vnic = 1, mac = "02:00:00:00:02:02" }]
routes = [{ prefix = "10.1.1.0/24", nexthop = 0 }]

[[rules]]
port = "p0"
dst = "10.1.0.0/16"
vr = "tenant-a"
vnic = 0
"#;

/// A VR's table named `a` with these fields (and no vNICs unless they
/// give some), as the schema reads it.
pub(super) fn vr_conf(fields: &str) -> VrConf {
    let vnics = if fields.contains("vnics =") {
        ""
    } else {
        "vnics = []\n"
    };
    toml::from_str(&format!("name = \"a\"\n{vnics}{fields}")).expect("the schema")
}

/// A step's error as `field: message`.
pub(super) fn said<T: std::fmt::Debug>(r: Result<T, FieldError>) -> String {
    let (_, field, msg) = r.unwrap_err();
    format!("{field}: {msg}")
}

/// `res` is an error whose message holds `want`; `case` (the input)
/// names it when it is not.
pub(super) fn assert_refused<T: std::fmt::Debug>(res: Result<T, String>, want: &str, case: &str) {
    let e = res.unwrap_err();
    assert!(e.contains(want), "{case}: want {want:?} in {e:?}");
}

pub(super) fn parse(src: &str) -> Result<Plan, String> {
    Config::parse(src, "v.toml", Path::new("."))
        .map(|(_, p)| p)
        .map_err(|e| e.to_string())
}

#[test]
fn a_good_config_plans_ports_vrs_and_rules() {
    let p = parse(GOOD).unwrap();
    assert_eq!(p.ports.len(), 2);
    assert_eq!(p.ports[1].1, Driver::AfXdp);
    assert_eq!(p.vrs[0].vnic_ports, vec![0, 1]);
    assert_eq!(p.vrs[0].slots, 1024);
    assert_eq!(p.classifier.len(), 1);
    assert_eq!(p.vrs[0].config["vnics"][1]["mac"], "02:00:00:00:01:02");
    assert_eq!(p.host.start_idle_ms, 2000);
    assert_eq!(p.rings, vec![PortRings::default(); 2]);
    let big = GOOD.replace(
        "\"veth1\"\n",
        "\"veth1\"\nring_size = 8192\nframes = 16384\n",
    );
    let rings = parse(&big).unwrap().rings[1];
    assert_eq!(
        (rings.af_xdp().ring_size, rings.af_xdp().frames),
        (8192, 16384)
    );
    let now = GOOD.replace("cpu = 0\n", "cpu = 0\nstart_idle_ms = 0\n");
    assert_eq!(parse(&now).unwrap().host.start_idle_ms, 0);
    let bad = GOOD.replace("cpu = 0\n", "cpu = 0\nstart_idle_ms = -1\n");
    assert!(parse(&bad).unwrap_err().contains("start_idle_ms"), "{bad}");
}

#[test]
fn errors_name_file_line_and_field() {
    let cases = [
        (
            GOOD.replace("port = \"p1\"", "port = \"p9\""),
            "v.toml:20: vrs[0].vnics[1].port: no port \"p9\"",
        ),
        (
            GOOD.replace("vr = \"tenant-a\"", "vr = \"nobody\""),
            "v.toml:29: rules[0].vr: no VR",
        ),
        (
            GOOD.replace("vnic = 0\n", "vnic = 5\n"),
            "v.toml:30: rules[0].vnic: VR \"tenant-a\" has 2 vNICs",
        ),
        (
            GOOD.replace("10.1.0.0/16", "10.1.0.0/40"),
            "v.toml:28: rules[0].dst",
        ),
        (
            GOOD.replace("slots = 1024", "slots = 1"),
            "v.toml:17: vrs[0].slots",
        ),
        (
            GOOD.replace("nexthop = 0 }", "nexthop = 7 }"),
            "vrs[0].router: routes[0].nexthop 7 out of range",
        ),
        (
            GOOD.replace("driver = \"af_xdp\"", "driver = \"dpdk\""),
            "unknown variant `dpdk`",
        ),
        (
            GOOD.replace("\"veth0\"\n", "\"veth0\"\nring_size = 4096\n"),
            "v.toml:9: ports[0].ring_size: only an af_xdp port has ring_size",
        ),
        (
            GOOD.replace("\"veth0\"\n", "\"veth0\"\ntx = \"xdp\"\n"),
            "v.toml:9: ports[0].tx: only an af_xdp port has tx",
        ),
        (
            GOOD.replace("\"veth1\"\n", "\"veth1\"\nrx_ring = \"frames\"\n"),
            "v.toml:14: ports[1].rx_ring: only an af_packet port has rx_ring",
        ),
        (
            GOOD.replace("\"veth1\"\n", "\"veth1\"\nring_size = 3000\n"),
            "v.toml:14: ports[1].ring_size: ring_size 3000 is not a power of two",
        ),
        (
            GOOD.replace("\"veth1\"\n", "\"veth1\"\nring_size = 64\nframes = 1\n"),
            "v.toml:15: ports[1].frames: frames 1 must be at least 2",
        ),
        (
            GOOD.replace("interface = \"veth1\"", "interface = \"veth0\""),
            "used by two ports",
        ),
        (
            format!(
                "{GOOD}\n[[vrs]]\nname = \"tenant-a\"\nvnics = [{{ port = \"p0\", mac = \"02:00:00:00:00:01\" }}]\n"
            ),
            "defined twice",
        ),
    ];
    for (src, want) in cases {
        assert_refused(parse(&src), want, &src);
    }
}

#[test]
fn instances_get_a_core_each_and_a_policy() {
    let with = |fields: &str| GOOD.replace("slots = 1024", &format!("slots = 1024\n{fields}"));
    let plan = parse(&with("instances = 2\ncpus = [1, 0]\nbalance = \"jsq\"")).unwrap();
    let v = &plan.vrs[0];
    assert_eq!(v.instances, 2);
    assert_eq!(v.instance_cpus, [Some(1), Some(0)]);
    assert_eq!(v.balance, crate::balance::Policy::ShortestQueue);
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.vrs[0].instances, 1);
    assert_eq!(plan.vrs[0].balance, crate::balance::Policy::Flow);
    for (fields, want) in [
        (
            "instances = 0",
            "v.toml:18: vrs[0].instances: 0: must be 1..=64",
        ),
        ("instances = 65", "vrs[0].instances: 65"),
        (
            "instances = 2\ncpu = 1",
            "vrs[0].instances: 2 instances cannot all be pinned",
        ),
        (
            "instances = 3\ncpus = [1, 0]",
            "vrs[0].cpus: 2 distinct cores for 3 instances",
        ),
        ("balance = \"fastest\"", "vrs[0].balance"),
    ] {
        assert_refused(parse(&with(fields)), want, fields);
    }
}

#[test]
fn scaling_vrs_take_cores_from_the_budget() {
    use crate::alloc::ScalePolicy;
    let ncpu = crate::confine::online_cpus();
    let with = |host: &str, fields: &str| {
        GOOD.replace("[host]\ncpu = 0", &format!("[host]\ncpu = 0\n{host}"))
            .replace("slots = 1024", &format!("slots = 1024\n{fields}"))
    };
    let shared = "share_worker_core = true";
    let v = parse(&with(shared, &format!("instances = {ncpu}")))
        .unwrap()
        .vrs[0]
        .clone();
    assert!(v.placed);
    assert_eq!(
        (v.instances, v.instance_slots()),
        (ncpu as u16, ncpu as u16)
    );
    assert_eq!(v.instance_cpus, vec![None; ncpu]);
    let scale = "scale = { up_pps = 1000, down_pps = 500, max = 2 }";
    if ncpu >= 2 {
        let v = parse(&with(shared, scale)).unwrap().vrs[0].clone();
        let ScalePolicy::Dynamic(d) = v.scale else {
            panic!("{:?}", v.scale)
        };
        assert_eq!((d.up_pps, d.down_pps, d.min, d.max), (1000.0, 500.0, 1, 2));
        assert_eq!(d.period, std::time::Duration::from_secs(1));
        assert!(v.placed);
        assert_eq!((v.instances, v.instance_slots()), (1, 2));
        let v = parse(&with("", &format!("{scale}\ncpus = [1, 0]")))
            .unwrap()
            .vrs[0]
            .clone();
        assert!(!v.placed, "its own cores");
        assert_eq!(v.instance_cpus, [Some(1), Some(0)]);
    }
    let one_vr = parse(&with("", "")).unwrap().vrs[0].clone();
    assert_eq!(
        (one_vr.placed, one_vr.scale),
        (false, ScalePolicy::Fixed(1))
    );
    // A scale table: these defaults, one field changed or added.
    let dynamic = |field: &str| {
        let key = field.split(" = ").next().unwrap_or_default();
        let mut fields: Vec<String> = ["up_pps = 1000", "down_pps = 500", "max = 1"]
            .into_iter()
            .filter(|f| !f.starts_with(key))
            .map(String::from)
            .collect();
        fields.push(field.to_string());
        with(shared, &format!("scale = {{ {} }}", fields.join(", ")))
    };
    let too_many = ncpu + 1;
    for (src, want) in [
        (
            dynamic("up_pps = 0"),
            "vrs[0].scale.up_pps: 0: must be a finite rate > 0".to_string(),
        ),
        (
            dynamic("down_pps = 0"),
            "vrs[0].scale.down_pps: 0: must be".into(),
        ),
        (
            dynamic("down_pps = 1000"),
            "vrs[0].scale.down_pps: 1000: must be below up_pps".into(),
        ),
        (dynamic("up_pps = -5"), "up_pps = -5".into()),
        (
            dynamic("period_ms = 0"),
            "vrs[0].scale.period_ms: 0: must be >= 1".into(),
        ),
        (dynamic("min = 0"), "vrs[0].scale.min: 0: must be".into()),
        (
            dynamic("min = 2"),
            "vrs[0].scale.max: 1: must be 2..=".into(),
        ),
        (
            dynamic("max = 65"),
            "vrs[0].scale.max: 65: must be 1..=64".into(),
        ),
        (dynamic("gap = 1"), "unknown field `gap`".into()),
        (
            dynamic(&format!("max = {too_many}")),
            format!(
                "vrs[0].scale.max: {too_many}: more instances than the {ncpu} cores of the host's budget"
            ),
        ),
        (
            with(shared, &format!("{scale}\ninstances = 2")),
            "vrs[0].instances: a VR with a `scale` table".into(),
        ),
        (
            with("", &format!("instances = {ncpu}")),
            format!(
                "vrs[0].instances: {ncpu} instances need a core each, but {} of the",
                ncpu - 1
            ),
        ),
        (
            with(&format!("instance_cores = {ncpu}"), ""),
            format!(
                "host.instance_cores: a budget of {ncpu} cores, but only {} CPUs",
                ncpu - 1
            ),
        ),
    ] {
        assert_refused(parse(&src), &want, &src);
    }
}

#[test]
fn hugepages_takes_off_auto_or_required_and_required_refuses_a_memory_limit() {
    use crate::hugepages::HugePages;
    assert_eq!(parse(GOOD).unwrap().host.hugepages, HugePages::Off);
    let with = |v: &str| GOOD.replace("cpu = 0\n", &format!("cpu = 0\nhugepages = {v}\n"));
    assert_eq!(
        parse(&with("\"auto\"")).unwrap().host.hugepages,
        HugePages::Auto
    );
    assert_eq!(
        parse(&with("\"required\"")).unwrap().host.hugepages,
        HugePages::Required
    );
    for bad in ["\"on\"", "true", "2"] {
        let e = parse(&with(bad)).unwrap_err();
        assert!(
            e.contains("hugepages") || e.contains("variant"),
            "{bad}: {e}"
        );
    }
    let limited = |v: &str| with(v).replace("slots = 1024", "slots = 1024\nmemory = \"256M\"");
    let e = parse(&limited("\"required\"")).unwrap_err();
    assert!(
        e.contains("host.hugepages") && e.contains("memory limit"),
        "{e}"
    );
    let plan = parse(&limited("\"auto\"")).unwrap();
    assert!(
        plan.vrs[0].path_spec().pool_initial.is_some(),
        "auto keeps it in small pages"
    );
}

#[test]
fn confinement_fields_are_checked() {
    let with = |fields: &str| GOOD.replace("slots = 1024", &format!("slots = 1024\n{fields}"));
    // Default: every wall, as nobody, no limits.
    let c = &parse(GOOD).unwrap().vrs[0].confine;
    assert_eq!(*c, Confine::strict());
    // Limits and user.
    let p = parse(&with(
        "cpu_quota = 0.5\nmemory = \"256M\"\ncpus = [0]\nuser = \"nobody\"",
    ))
    .unwrap();
    let c = &p.vrs[0].confine;
    assert_eq!(c.cpu_quota, Some(0.5));
    assert_eq!(c.memory, Some(256 << 20));
    assert_eq!(c.cpus, Some(vec![0]));
    assert_eq!(c.user, Some(crate::confine::Ids::NOBODY));
    assert!(c.netns && c.seccomp && c.no_new_privs && c.close_fds);
    let p = parse(&with(
        "cpu_quota = 1\nmemory = 33554432\nuser = 65534\ncpu = 0",
    ))
    .unwrap();
    let c = &p.vrs[0].confine;
    assert_eq!((c.cpu_quota, c.memory), (Some(1.0), Some(32 << 20)));
    assert_eq!(c.cpus, Some(vec![0]), "cpuset defaults to the pinned core");
    // Off: nothing, unless a VR asks for it.
    let off = format!("[host]\nconfine = false\n{}", GOOD.replace("[host]\n", ""));
    assert!(parse(&off).unwrap().vrs[0].confine.is_off());
    let off_mem = off.replace("slots = 1024", "slots = 1024\nmemory = \"1G\"");
    let c = &parse(&off_mem).unwrap().vrs[0].confine;
    assert!(!c.netns && c.user.is_none() && c.memory == Some(1 << 30));
    // Errors name file, line and field.
    for (fields, want) in [
        (
            "cpu_quota = 0",
            "v.toml:18: vrs[0].cpu_quota: 0: must be 0.01..=",
        ),
        ("cpu_quota = 999", "v.toml:18: vrs[0].cpu_quota"),
        (
            "memory = \"12X\"",
            "v.toml:18: vrs[0].memory: \"12X\": unknown unit",
        ),
        (
            "memory = 1024",
            "v.toml:18: vrs[0].memory: 1024 bytes: a VR needs at least 16M",
        ),
        ("memory = -5", "v.toml:18: vrs[0].memory: -5: negative"),
        (
            "cpus = []",
            "v.toml:18: vrs[0].cpus: must name at least one CPU",
        ),
        (
            "cpus = [999]",
            "v.toml:18: vrs[0].cpus: CPU 999: this host has",
        ),
        ("cpus = [0, 0]", "v.toml:18: vrs[0].cpus: CPU 0 given twice"),
        ("cpu = 4096", "vrs[0].cpu: CPU 4096: this host has"),
        ("cpu = 0\ncpus = [1]", "v.toml:19: vrs[0].cpus"),
        (
            "user = \"no-such-user-xyz\"",
            "v.toml:18: vrs[0].user: no user \"no-such-user-xyz\"",
        ),
        (
            "user = 0",
            "v.toml:18: vrs[0].user: a VR does not run as root",
        ),
        ("user = 1.5", "v.toml:18: vrs[0].user"),
    ] {
        assert_refused(parse(&with(fields)), want, fields);
    }
}

#[test]
fn a_route_file_the_vr_cannot_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("vrhost-cfg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("routes.txt");
    std::fs::write(&f, "10.9.0.0/16\n").unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = GOOD.replace(
        "[vrs.router]\n",
        &format!("[vrs.router]\nroute_file = {:?}\n", f.display().to_string()),
    );
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ok = parse(&src);
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let owner_is_nobody = rustix::process::geteuid().as_raw() == 65534;
    let refused = parse(&src);
    std::fs::remove_dir_all(&dir).unwrap();
    ok.unwrap();
    if !owner_is_nobody {
        let e = refused.unwrap_err();
        assert!(
            e.contains("vrs[0].router.route_file") && e.contains("cannot be read by uid 65534"),
            "{e}"
        );
    }
}

const CLUSTER: &str = r#"
[[ports]]
name = "in"
driver = "null"

[[ports]]
name = "under"
driver = "null"

[cluster]
role = "dispatcher"
heartbeat = "10.9.0.1:4790"
underlay = "under"
local = "10.9.0.1"
local_mac = "02:00:00:00:00:01"

[[cluster.engines]]
name = "e1"
address = "10.9.0.11"
capacity = 2

[[cluster.engines]]
name = "e2"
address = "10.9.0.12"
mac = "02:00:00:00:00:12"
heartbeat_port = 5000

[[cluster.vrs]]
name = "r"
id = 7
ports = ["in"]
engines = ["e1", "e2"]
policy = "proportional"
"#;

#[test]
fn a_dispatcher_s_cluster_table_plans_its_engines_and_remote_vrs() {
    use crate::cluster::ClusterPolicy;
    use crate::config::ClusterPlan;
    let p = parse(CLUSTER).unwrap();
    let Some(ClusterPlan::Dispatcher {
        spec,
        heartbeat,
        interval,
        misses,
        beats,
        etcd,
        members,
    }) = p.cluster
    else {
        panic!("{:?}", p.cluster);
    };
    assert_eq!(heartbeat.to_string(), "10.9.0.1:4790");
    assert_eq!(etcd, None);
    assert_eq!(
        (&members.base, &members.beats, members.via),
        (&spec, &beats, None)
    );
    assert_eq!((interval.as_millis(), misses), (100, 3));
    assert_eq!(spec.underlay, 1);
    assert_eq!(spec.engines[0].capacity, 2);
    assert_eq!(spec.engines[0].udp_port, 4789);
    assert_eq!(spec.engines[1].remote_mac, Some([2, 0, 0, 0, 0, 0x12]));
    assert_eq!(beats[1].1.to_string(), "10.9.0.12:5000");
    assert_eq!(beats[0].1.to_string(), "10.9.0.11:4790");
    let v = &spec.vrs[0];
    assert_eq!((v.id, &v.ports, &v.engines), (7, &vec![0], &vec![0, 1]));
    assert_eq!(v.policy, ClusterPolicy::Proportional);
    let e = parse("[cluster]\nrole = \"engine\"\nheartbeat = \"10.9.0.11:4790\"\n").unwrap();
    assert!(matches!(e.cluster, Some(ClusterPlan::Engine { .. })));
    assert!(parse(GOOD).unwrap().cluster.is_none());
}

#[test]
fn a_cluster_table_that_cannot_work_is_refused_with_its_field() {
    let cases = [
        ("role = \"dispatcher\"", "role = \"boss\"", "cluster.role"),
        ("\"10.9.0.1:4790\"", "\"10.9.0.1\"", "cluster.heartbeat"),
        (
            "underlay = \"under\"",
            "underlay = \"nope\"",
            "cluster.underlay",
        ),
        ("id = 7", "id = 0", "id 0"),
        (
            "[\"e1\", \"e2\"]",
            "[\"e1\", \"e9\"]",
            "cluster.vrs[0].engines",
        ),
        ("ports = [\"in\"]", "ports = [\"under\"]", "underlay"),
        (
            "policy = \"proportional\"",
            "policy = \"hash\"",
            "cluster.vrs[0].policy",
        ),
        ("name = \"e2\"", "name = \"e1\"", "defined twice"),
        ("capacity = 2", "capacity = 0", "capacity"),
        (
            "local = \"10.9.0.1\"",
            "local = \"224.0.0.1\"",
            "cluster.local",
        ),
    ];
    for (from, to, want) in cases {
        assert!(CLUSTER.contains(from), "{from}");
        let src = CLUSTER.replacen(from, to, 1);
        assert_refused(parse(&src), want, to);
    }
    // A local VR on a port the dispatcher owns.
    let src = format!(
        "{CLUSTER}\n[[vrs]]\nname = \"local\"\nvnics = [{{ port = \"in\", mac = \"02:00:00:00:01:01\" }}]\n"
    );
    assert_refused(parse(&src), "owns", "a local VR on an owned port");
    // A rate: placed on every engine; one too large says what is free.
    let rated = CLUSTER.replacen("engines = [\"e1\", \"e2\"]", "rate = 2.5", 1);
    let p = parse(&rated).unwrap();
    let Some(crate::config::ClusterPlan::Dispatcher { spec, .. }) = p.cluster else {
        panic!()
    };
    assert_eq!(
        (spec.vrs[0].rate, &spec.vrs[0].engines),
        (Some(2.5), &vec![0, 1])
    );
    let big = CLUSTER.replacen("engines = [\"e1\", \"e2\"]", "rate = 4.0", 1);
    assert_refused(parse(&big), "3 pps free", "a rate over the capacity");
    let both = CLUSTER.replacen("policy =", "rate = 1.0\npolicy =", 1);
    assert_refused(parse(&both), "leave `engines` out", "rate and engines");
    let eng = "[cluster]\nrole = \"engine\"\nheartbeat = \"10.9.0.11:4790\"\nunderlay = \"x\"\n";
    assert_refused(
        parse(eng),
        "underlay and local only with etcd",
        "engine with underlay",
    );
}

/// `[cluster] etcd`: the engine's advertisement, the dispatcher's `vr`
/// table (each vNIC's MAC filled in), and what cannot work refused.
#[test]
fn the_etcd_keys_of_a_cluster_table_plan_the_agents() {
    use crate::cluster::desired::{DEFAULT_LEASE, DEFAULT_PREFIX};
    use crate::config::ClusterPlan;
    let engine = "[[ports]]\nname = \"under\"\ndriver = \"null\"\n[cluster]\nrole = \"engine\"\n\
                  heartbeat = \"10.9.0.11:4790\"\netcd = [\"http://10.9.0.254:2379\"]\n\
                  name = \"e1\"\nunderlay = \"under\"\nlocal = \"10.9.0.11\"\ncores = 2\n\
                  per_core_pps = 50000\n";
    let Some(ClusterPlan::Engine { etcd: Some(e), .. }) = parse(engine).unwrap().cluster else {
        panic!("no etcd plan");
    };
    assert_eq!(e.endpoints, ["http://10.9.0.254:2379"]);
    assert_eq!(
        (e.prefix.as_str(), e.lease),
        (DEFAULT_PREFIX, DEFAULT_LEASE)
    );
    let ad = e.engine.unwrap();
    assert_eq!((ad.name.as_str(), ad.underlay.as_str()), ("e1", "under"));
    assert_eq!(ad.capacity(), 100_000);
    assert_eq!(ad.heartbeat_port, Some(4790));
    assert!(!e.measure, "per_core_pps given");
    let measured = engine.replacen("per_core_pps = 50000\n", "", 1);
    let Some(ClusterPlan::Engine { etcd: Some(m), .. }) = parse(&measured).unwrap().cluster else {
        panic!("no etcd plan");
    };
    assert!(m.measure, "no per_core_pps: measured");
    for (from, to, want) in [
        ("http://10.9.0.254:2379", "10.9.0.254", "cluster.etcd[0]"),
        ("name = \"e1\"\n", "", "needs name, underlay and local"),
        ("cores = 2", "cores = 0", "at least 1"),
        (
            "cores = 2",
            "cores = 2\nnext_hop_mac = \"x\"",
            "cluster.next_hop_mac",
        ),
        ("[\"http://10.9.0.254:2379\"]", "[]", "only with etcd"),
    ] {
        assert_refused(parse(&engine.replacen(from, to, 1)), want, to);
    }
    let keys = "local_mac = \"02:00:00:00:00:01\"\netcd = [\"http://10.9.0.254:2379\"]\n\
                etcd_prefix = \"/vrhost/lab/\"";
    let src = CLUSTER.replacen("local_mac = \"02:00:00:00:00:01\"", keys, 1)
        + "[cluster.vrs.vr]\nvnics = [{ addrs = [\"10.1.0.1/24\"], mac = \"02:00:00:00:01:01\" }]\n";
    let p = parse(&src).unwrap();
    let Some(ClusterPlan::Dispatcher { spec, etcd, .. }) = p.cluster else {
        panic!()
    };
    assert_eq!(etcd.unwrap().prefix, "/vrhost/lab");
    let t = spec.vrs[0].vr.as_ref().unwrap();
    assert_eq!(t["vnics"][0]["mac"].as_str(), Some("02:00:00:00:01:01"));
    // A vNIC per port; no tunnel of its own; no `vr` without etcd.
    let two = src.replacen("vnics = [{", "vnics = [{}, {", 1);
    assert_refused(parse(&two), "2 vnics for 1 ports", "two vNICs");
    let tunnel = src.replacen("mac = \"02:00:00:00:01:01\"", "tunnel = \"t\"", 1);
    assert_refused(parse(&tunnel), "the engine binds it", "a tunnel");
    let no_etcd = src.replacen("etcd = [\"http://10.9.0.254:2379\"]", "", 1);
    assert_refused(parse(&no_etcd), "give cluster.etcd", "vr without etcd");
    // With etcd, no configured engine: a VR with a rate waits for the
    // engines that register, sent to through the next hop's MAC.
    let (head, _) = src.split_once("[[cluster.engines]]").unwrap();
    let (_, vrs) = src.split_once("[[cluster.vrs]]").unwrap();
    let bare = format!("{head}next_hop_mac = \"02:00:00:00:00:fe\"\n[[cluster.vrs]]{vrs}")
        .replacen("engines = [\"e1\", \"e2\"]", "rate = 1000.0", 1);
    let Some(ClusterPlan::Dispatcher { spec, members, .. }) = parse(&bare).unwrap().cluster else {
        panic!()
    };
    assert!(spec.engines.is_empty() && spec.vrs[0].engines.is_empty());
    assert_eq!(members.via, Some([2, 0, 0, 0, 0, 0xfe]));
    let bare = bare.replacen("etcd = [\"http://10.9.0.254:2379\"]", "", 1);
    assert_refused(parse(&bare), "or etcd where engines register", "no engines");
}
