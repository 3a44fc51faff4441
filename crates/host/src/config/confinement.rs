//! How a VR's process is confined: every wall if `host.confine`, and the
//! VR's own `user`, `cpu_quota`, `cpus` and `memory`; its user must be able
//! to run its program and read its route file.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::schema::{Config, VrConf};
use super::{ConfigError, FieldError, Source};
use crate::confine::{Confine, Ids, check_access, online_cpus, parse_bytes, resolve_user};

impl Config {
    /// How VR `i` (`v`) is confined: everything if `host.confine`, and its
    /// own `user`, `cpu_quota`, `cpus` and `memory`. Its user must be able
    /// to execute its program (run through the host's descriptor, so the
    /// directories above it do not count) and to reach and read its route
    /// file.
    pub(super) fn vr_confine(
        &self,
        i: usize,
        v: &VrConf,
        program: &Option<(PathBuf, Vec<String>)>,
        config: &serde_json::Value,
        at: &Source,
    ) -> Result<Confine, ConfigError> {
        let fail = |(span, field, msg): FieldError| at.err(span, format!("vrs[{i}].{field}"), msg);
        let ncpu = online_cpus();
        let mut c = if self.host.confine {
            Confine::strict()
        } else {
            Confine::default()
        };
        if let Some(q) = cpu_quota(v, ncpu).map_err(fail)? {
            c.cpu_quota = Some(q);
        }
        if let Some(bytes) = memory(v).map_err(fail)? {
            c.memory = Some(bytes);
        }
        if let Some(list) = cpus(v, ncpu).map_err(fail)? {
            c.cpus = Some(list);
        } else if c.wants_cgroup() {
            c.cpus = v.cpu.map(|p| vec![p]);
        }
        if let Some(ids) = user(v).map_err(fail)? {
            c.user = Some(ids);
        }
        if let Some(ids) = c.user {
            check_reach(v, ids, program, config).map_err(fail)?;
        }
        Ok(c)
    }
}

/// `cpu_quota`: 0.01 cores up to all of this host's `ncpu`.
fn cpu_quota(v: &VrConf, ncpu: usize) -> Result<Option<f64>, FieldError> {
    let Some(q) = &v.cpu_quota else {
        return Ok(None);
    };
    let x = *q.get_ref();
    if !(0.01..=ncpu as f64).contains(&x) {
        let msg = format!("{x}: must be 0.01..={ncpu} (cores of this host)");
        return Err((q.span(), "cpu_quota", msg));
    }
    Ok(Some(x))
}

/// `memory`: bytes, or a size like `"256M"`; at least 16M.
fn memory(v: &VrConf) -> Result<Option<u64>, FieldError> {
    let Some(m) = &v.memory else {
        return Ok(None);
    };
    let bytes = match m.get_ref() {
        toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n}: negative")),
        toml::Value::String(s) => parse_bytes(s),
        other => Err(format!("{other}: bytes, or a size like \"256M\"")),
    }
    .map_err(|msg| (m.span(), "memory", msg))?;
    if bytes < 16 << 20 {
        let msg = format!("{bytes} bytes: a VR needs at least 16M");
        return Err((m.span(), "memory", msg));
    }
    Ok(Some(bytes))
}

/// `cpus`: distinct CPUs of this host's `ncpu`, at least one, and the VR's
/// `cpu` among them.
fn cpus(v: &VrConf, ncpu: usize) -> Result<Option<Vec<usize>>, FieldError> {
    let Some(cs) = &v.cpus else {
        return Ok(None);
    };
    let list = cs.get_ref();
    let mut seen = std::collections::BTreeSet::new();
    let bad = if list.is_empty() {
        Some("must name at least one CPU".to_string())
    } else if let Some(x) = list.iter().find(|&&x| x >= ncpu) {
        Some(format!("CPU {x}: this host has {ncpu}"))
    } else if let Some(x) = list.iter().find(|&&x| !seen.insert(x)) {
        Some(format!("CPU {x} given twice"))
    } else {
        v.cpu
            .filter(|p| !list.contains(p))
            .map(|p| format!("does not include CPU {p}, the VR's `cpu`"))
    };
    match bad {
        Some(msg) => Err((cs.span(), "cpus", msg)),
        None => Ok(Some(list.clone())),
    }
}

/// `user`: a user name or a uid of this host, not root.
fn user(v: &VrConf) -> Result<Option<Ids>, FieldError> {
    let Some(u) = &v.user else {
        return Ok(None);
    };
    let ids = match u.get_ref() {
        toml::Value::Integer(n) => resolve_user(&n.to_string()),
        toml::Value::String(s) => resolve_user(s),
        other => Err(format!("{other}: a user name or a uid")),
    }
    .map_err(|msg| (u.span(), "user", msg))?;
    Ok(Some(ids))
}

/// The VR's user (`ids`) can execute its program and read the built-in
/// router's route file.
fn check_reach(
    v: &VrConf,
    ids: Ids,
    program: &Option<(PathBuf, Vec<String>)>,
    config: &serde_json::Value,
) -> Result<(), FieldError> {
    if let (Some((p, _)), Some(span)) = (program, v.program.as_ref().map(Spanned::span)) {
        check_access(p, ids, true).map_err(|msg| (span, "program", msg))?;
    }
    let router = program.is_none();
    if let Some(rf) = config
        .get("route_file")
        .and_then(|x| x.as_str())
        .filter(|_| router)
    {
        check_access(Path::new(rf), ids, false)
            .map_err(|msg| (v.name.span(), "router.route_file", msg))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{said, vr_conf};

    #[test]
    fn limits_left_out_are_none() {
        let v = vr_conf("");
        assert_eq!(cpu_quota(&v, 2).unwrap(), None);
        assert_eq!(memory(&v).unwrap(), None);
        assert_eq!(cpus(&v, 2).unwrap(), None);
        assert_eq!(user(&v).unwrap(), None);
        check_reach(&v, Ids::NOBODY, &None, &serde_json::json!({})).unwrap();
    }

    #[test]
    fn cpu_quota_is_a_share_of_this_hosts_cores() {
        assert_eq!(
            cpu_quota(&vr_conf("cpu_quota = 1.5"), 2).unwrap(),
            Some(1.5)
        );
        assert_eq!(
            said(cpu_quota(&vr_conf("cpu_quota = 2.5"), 2)),
            "cpu_quota: 2.5: must be 0.01..=2 (cores of this host)"
        );
        assert!(said(cpu_quota(&vr_conf("cpu_quota = 0.001"), 2)).starts_with("cpu_quota: "));
    }

    #[test]
    fn memory_is_bytes_or_a_size() {
        assert_eq!(memory(&vr_conf("memory = \"1G\"")).unwrap(), Some(1 << 30));
        assert_eq!(
            memory(&vr_conf("memory = 16777216")).unwrap(),
            Some(16 << 20)
        );
        for (fields, want) in [
            ("memory = -1", "memory: -1: negative"),
            ("memory = \"1Q\"", "memory: \"1Q\": unknown unit"),
            (
                "memory = true",
                "memory: true: bytes, or a size like \"256M\"",
            ),
            (
                "memory = \"15M\"",
                "memory: 15728640 bytes: a VR needs at least 16M",
            ),
        ] {
            let got = said(memory(&vr_conf(fields)));
            assert!(got.starts_with(want), "want {want:?} in {got:?}");
        }
    }

    #[test]
    fn cpus_are_distinct_cpus_of_this_host_with_the_vrs_cpu() {
        assert_eq!(
            cpus(&vr_conf("cpus = [1, 0]\ncpu = 1"), 2).unwrap(),
            Some(vec![1, 0])
        );
        for (fields, want) in [
            ("cpus = []", "cpus: must name at least one CPU"),
            ("cpus = [2]", "cpus: CPU 2: this host has 2"),
            ("cpus = [1, 1]", "cpus: CPU 1 given twice"),
            (
                "cpus = [1]\ncpu = 0",
                "cpus: does not include CPU 0, the VR's `cpu`",
            ),
        ] {
            assert_eq!(said(cpus(&vr_conf(fields), 2)), want, "{fields}");
        }
    }

    #[test]
    fn user_is_a_name_or_a_uid_but_not_root() {
        assert_eq!(
            user(&vr_conf("user = \"nobody\"")).unwrap(),
            Some(Ids::NOBODY)
        );
        assert_eq!(user(&vr_conf("user = 65534")).unwrap(), Some(Ids::NOBODY));
        for (fields, want) in [
            ("user = 0", "user: a VR does not run as root"),
            (
                "user = \"no-such-user-xyz\"",
                "user: no user \"no-such-user-xyz\"",
            ),
            ("user = [1]", "user: [1]: a user name or a uid"),
        ] {
            let got = said(user(&vr_conf(fields)));
            assert!(got.starts_with(want), "want {want:?} in {got:?}");
        }
    }

    #[test]
    fn the_user_must_reach_its_program_and_route_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("vrhost-reach-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let prog = dir.join("vr");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        let v = vr_conf("program = \"vr\"");
        let with = |mode: u32| {
            std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(mode)).unwrap();
            let program = Some((prog.clone(), vec![]));
            check_reach(&v, Ids::NOBODY, &program, &serde_json::json!({}))
        };
        let runs = with(0o755);
        let refused = with(0o700);
        // A route file is the router's: a program's config may name one.
        let routes = dir.join("routes.txt");
        std::fs::write(&routes, "").unwrap();
        std::fs::set_permissions(&routes, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = serde_json::json!({ "route_file": routes.display().to_string() });
        let router = check_reach(&vr_conf(""), Ids::NOBODY, &None, &config);
        let program = check_reach(
            &vr_conf(""),
            Ids::NOBODY,
            &Some((prog.clone(), vec![])),
            &config,
        );
        std::fs::remove_dir_all(&dir).unwrap();
        runs.unwrap();
        program.unwrap();
        if rustix::process::geteuid().as_raw() != Ids::NOBODY.uid {
            assert!(said(refused).starts_with("program: "));
            assert!(said(router).starts_with("router.route_file: "));
        }
    }
}
