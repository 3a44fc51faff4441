//! Tests of the confinement: users, limits, cgroups, the child's steps.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::child::pipe_cloexec;
use super::seccomp::filters;
use super::*;

#[test]
fn sizes_parse() {
    assert_eq!(parse_bytes("256M"), Ok(256 << 20));
    assert_eq!(parse_bytes("1G"), Ok(1 << 30));
    assert_eq!(parse_bytes("64 MiB"), Ok(64 << 20));
    assert_eq!(parse_bytes("4096"), Ok(4096));
    assert!(parse_bytes("1X").is_err());
    assert!(parse_bytes("M").is_err());
    assert!(parse_bytes("99999999999T").is_err());
}

#[test]
fn cpu_lists_parse() {
    assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
    assert_eq!(parse_cpu_list("1"), Some(vec![1]));
    assert_eq!(parse_cpu_list(""), Some(vec![]));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("x"), None);
    assert!(online_cpus() >= 1);
}

#[test]
fn v1_layout_from_mountinfo() {
    let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct
32 25 0:28 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
33 25 0:29 /outer /sys/fs/cgroup/mem\\040ory rw,relatime - cgroup cgroup rw,memory
34 25 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
    let self_cgroup = "4:memory:/outer/svc\n3:cpuset:/\n1:cpu:/a/b\n0::/\n";
    let got = parse_v1(mountinfo, self_cgroup);
    assert_eq!(
        got,
        vec![
            (PathBuf::from("/sys/fs/cgroup/cpu/a/b"), vec![Ctrl::Cpu]),
            (PathBuf::from("/sys/fs/cgroup/cpuset"), vec![Ctrl::Cpuset]),
            (
                PathBuf::from("/sys/fs/cgroup/mem ory/svc"),
                vec![Ctrl::Memory]
            ),
        ]
    );
}

#[test]
fn users_resolve() {
    assert_eq!(resolve_user("nobody").unwrap().uid, 65534);
    assert_eq!(resolve_user("65534").unwrap(), Ids::NOBODY);
    assert_eq!(resolve_user("4000000").unwrap().gid, 4_000_000);
    assert!(
        resolve_user("no-such-user-here")
            .unwrap_err()
            .contains("no user")
    );
    assert!(resolve_user("root").unwrap_err().contains("root"));
    assert!(resolve_user("0").is_err());
}

#[test]
fn access_is_judged_by_mode_bits() {
    let dir = std::env::temp_dir().join(format!("vrhost-confine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("routes.txt");
    std::fs::write(&f, "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let set =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    set(&dir, 0o755);
    set(&f, 0o644);
    let owner = std::fs::metadata(&f).unwrap().uid();
    let other = Ids {
        uid: owner.wrapping_add(12345),
        gid: 4_000_001,
    };
    let r = check_access(&f, other, false);
    set(&f, 0o600);
    let r2 = check_access(&f, other, false);
    set(&f, 0o644);
    set(&dir, 0o700);
    let r3 = check_access(&f, other, false);
    set(&dir, 0o755);
    let r4 = check_access(&f, other, true);
    // A program is executed through the host's descriptor: only its
    // own mode counts.
    set(&f, 0o755);
    set(&dir, 0o700);
    let r5 = check_access(&f, other, true);
    set(&dir, 0o755);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert!(r2.unwrap_err().contains("cannot be read"));
    assert!(r3.unwrap_err().contains("cannot be searched"));
    assert!(r4.unwrap_err().contains("cannot be executed"));
    assert!(r5.is_ok(), "{r5:?}");
}

fn bare(program: &str) -> Prepared {
    Prepared {
        ids: None,
        netns: false,
        nnp: false,
        close_fds: false,
        clean_env: false,
        filters: Vec::new(),
        procs: Vec::new(),
        report: Some(pipe_cloexec().unwrap()),
        cgroups: None,
        program: program.into(),
    }
}

/// A step that fails in the child is reported by name; an exec that
/// fails after the steps too.
#[test]
fn failures_in_the_child_are_named() {
    // A "cgroup.procs" that refuses the write (opened read-only).
    let mut prep = bare("/bin/true");
    prep.procs
        .push(std::fs::File::open("/dev/null").unwrap().into());
    let mut cmd = Command::new("/bin/true");
    prep.apply(&mut cmd);
    let r = cmd.spawn();
    let e = prep.finish(&r).unwrap().to_string();
    assert!(r.is_err());
    assert!(
        e.contains("before exec: join the cgroup") && e.contains("Bad file descriptor"),
        "{e}"
    );
    let mut prep = bare("/nonexistent/vr");
    let mut cmd = Command::new("/nonexistent/vr");
    prep.apply(&mut cmd);
    let r = cmd.spawn();
    let e = prep.finish(&r).unwrap().to_string();
    assert!(
        e.contains("exec /nonexistent/vr as the host's user") && e.contains("No such file"),
        "{e}"
    );
    // Success reports nothing.
    let mut prep = bare("/bin/true");
    let mut cmd = Command::new("/bin/true");
    prep.apply(&mut cmd);
    let r = cmd.spawn();
    assert!(prep.finish(&r).is_none());
    r.unwrap().wait().unwrap();
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_filters_compile() {
    let f = filters().unwrap();
    assert_eq!(f.len(), 2);
    assert!(f[0].len() > 70 && f[0].len() < 4096, "{}", f[0].len());
}

/// cgroup v2 without controllers (the unified tree of a hybrid v1
/// machine), or the real hierarchy: the directory is made, a process
/// joins it, and it goes after the process is reaped.
#[test]
fn cgroups_are_made_joined_and_removed() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let mut hiers = vec![detect().unwrap()];
    let unified = Path::new("/sys/fs/cgroup/unified");
    if unified.join("cgroup.controllers").exists() {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/");
        hiers.push(Hierarchy::V2(unified.join(own.trim_start_matches('/'))));
    }
    for hier in hiers {
        let name = format!("unit-test-{}.0", std::process::id());
        let mut cg = Cgroups::create(&hier, &name, &Limits::default()).unwrap();
        assert!(!cg.dirs().is_empty());
        let d = cg.dirs()[0].clone();
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        std::fs::write(d.join("cgroup.procs"), child.id().to_string()).unwrap();
        let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        cg.remove();
        assert!(procs.contains(&child.id().to_string()), "{procs}");
        assert!(!d.exists(), "{} removed", d.display());
    }
}

/// The directories of a process that has exited but is not yet stopped
/// are empty, and old if it ran long: the sweep of stale directories
/// must leave them to their owner, and a new process of the same VR
/// must get other names, or the owner's `remove` takes the new one's.
#[test]
fn a_new_cgroup_never_takes_the_name_of_one_still_owned() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let hier = detect().unwrap();
    let name = format!("unit-test-owned-{}.0", std::process::id());
    let mut old = Cgroups::create(&hier, &name, &Limits::default()).unwrap();
    let minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
    for d in old.dirs() {
        std::fs::File::open(d)
            .and_then(|f| f.set_modified(minute_ago))
            .unwrap();
    }
    let mut new = Cgroups::create(&hier, &name, &Limits::default()).unwrap();
    let (old_dirs, new_dirs) = (old.dirs().to_vec(), new.dirs().to_vec());
    old.remove();
    let kept = new_dirs.iter().all(|d| d.exists());
    let old_gone = old_dirs.iter().all(|d| !d.exists());
    new.remove();
    assert!(old_gone, "{old_dirs:?} removed by their owner");
    assert!(
        kept,
        "{new_dirs:?} (the new process's) kept while {old_dirs:?} go"
    );
    assert!(
        old_dirs.iter().all(|d| !new_dirs.contains(d)),
        "{old_dirs:?} vs {new_dirs:?}"
    );
    assert!(new_dirs.iter().all(|d| !d.exists()));
}
