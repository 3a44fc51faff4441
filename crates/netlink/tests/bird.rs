//! The watch against BIRD 2 (Debian package `bird2`) running in a
//! namespace of the test's own: BIRD's static routes, exported to the
//! kernel table by its `kernel` protocols, arrive with protocol 12
//! (`bird`); `birdc down` withdraws them. Skipped (and says so) when
//! `bird` is not installed. No traffic is sent.

mod common;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{can_run, lab, watch};
use vrhost_netlink::{RouteKind, WatchFilter, WatchOptions, proto};

/// The program's path, if it is on PATH.
fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// BIRD in the foreground, killed on drop if still running.
struct Bird(Child);

impl Drop for Bird {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const CONF: &str = r#"
log stderr all;
router id 10.0.0.1;

protocol device {
}

protocol static static4 {
    ipv4;
    route 10.20.0.0/16 via 10.0.0.2;
    route 10.21.0.0/16 via 10.0.0.3;
    route 10.22.0.0/16 blackhole;
}

protocol static static6 {
    ipv6;
    route 2001:db8:20::/48 via 2001:db8::2;
}

protocol kernel kernel4 {
    ipv4 { export all; };
}

protocol kernel kernel6 {
    ipv6 { export all; };
}
"#;

fn birdc(sock: &Path, args: &[&str]) -> String {
    let out = Command::new("birdc")
        .arg("-s")
        .arg(sock)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("birdc runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn birds_routes_arrive_as_proto_bird_and_go_when_bird_is_down() {
    if !can_run() {
        return;
    }
    if which("bird").is_none() || which("birdc").is_none() {
        eprintln!("SKIPPED: bird/birdc not installed (Debian package bird2)");
        return;
    }
    let ns = lab();
    let dir = TempDir(std::env::temp_dir().join(format!("{}-bird", ns.name())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let conf = dir.0.join("bird.conf");
    let sock = dir.0.join("bird.ctl");
    let pid = dir.0.join("bird.pid");
    std::fs::write(&conf, CONF).unwrap();

    let (w, mut c) = watch(&ns, WatchFilter::default(), WatchOptions::default());
    let mut cmd = ns.command("bird");
    cmd.arg("-f")
        .arg("-c")
        .arg(&conf)
        .arg("-s")
        .arg(&sock)
        .arg("-P")
        .arg(&pid)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut bird = Bird(cmd.spawn().expect("bird starts"));

    let end = Instant::now() + Duration::from_secs(10);
    while c.table.len() < 4 {
        if let Ok(Some(status)) = bird.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = bird.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("bird exited ({status}): {err}");
        }
        assert!(
            Instant::now() < end,
            "BIRD's routes did not arrive: {:?}\n{}",
            c.table,
            birdc(&sock, &["show", "route"])
        );
        c.settle(Duration::from_millis(50));
    }
    for (p, via) in [
        ("10.20.0.0/16", Some("10.0.0.2")),
        ("10.21.0.0/16", Some("10.0.0.3")),
        ("2001:db8:20::/48", Some("2001:db8::2")),
    ] {
        let r = c.get(p).unwrap_or_else(|| panic!("{p}: {:?}", c.table));
        assert_eq!(r.protocol, proto::BIRD, "{r:?}");
        assert_eq!(r.via, via.map(|v| v.parse::<IpAddr>().unwrap()), "{r:?}");
    }
    let bh = c.get("10.22.0.0/16").expect("blackhole");
    assert_eq!((bh.kind, bh.protocol), (RouteKind::Blackhole, proto::BIRD));

    // Shut BIRD down: it withdraws what it exported.
    let out = birdc(&sock, &["down"]);
    c.until("BIRD's routes withdrawn", |t| t.is_empty());
    let end = Instant::now() + Duration::from_secs(10);
    while bird.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "bird still running after down: {out}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = w.stop().unwrap();
    assert!(st.withdrawn >= 4, "{st:?}");
}
