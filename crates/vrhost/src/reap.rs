//! A bench or lab run stopped by SIGINT or SIGTERM takes its children
//! with it: the daemons, generators and `iperf3`s it started would
//! otherwise keep running (and keep the descriptors they inherited, such
//! as a lock a wrapper holds) after it is gone. Its namespaces stay; the
//! next run of the same lab removes them when it comes up.

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long the children get to stop on SIGTERM (a daemon stops its VRs)
/// before every descendant left is killed.
const GRACE: Duration = Duration::from_secs(3);

/// From now on, SIGINT or SIGTERM stops this process's descendants, then
/// exits with 128 + the signal.
///
/// # Errors
/// If the signal handlers cannot be installed.
pub fn stop_children_on_signal() -> std::io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    thread::Builder::new().name("reap".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            eprintln!("vrhost: signal {sig}: stopping the processes this run started");
            stop_descendants(std::process::id(), GRACE);
            // Huge pages `bench memory --hugepages` reserved for its run.
            vrhost_bench::memory::put_back_hugepages();
            std::process::exit(128 + sig);
        }
    })?;
    Ok(())
}

/// SIGTERM to `root`'s children; once they are gone, or after `grace`,
/// SIGKILL to every descendant of `root` (as they were before) still
/// running.
pub fn stop_descendants(root: u32, grace: Duration) {
    let all = descendants(root);
    let direct = children(root);
    for &p in &direct {
        signal(p, Signal::TERM);
    }
    let deadline = Instant::now() + grace;
    while direct.iter().any(|&p| running(p)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    for &p in &all {
        if running(p) {
            signal(p, Signal::KILL);
        }
    }
}

/// The children of `pid` (of each of its threads).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        let path = t.path().join("children");
        if let Ok(s) = fs::read_to_string(path) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

/// Every descendant of `pid`, children first.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = children(pid);
    let mut i = 0;
    while i < out.len() {
        let more = children(out[i]);
        out.extend(more);
        i += 1;
    }
    out
}

/// Whether `pid` exists and is not a zombie.
fn running(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command's closing parenthesis.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X'))
}

fn signal(pid: u32, sig: Signal) {
    let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    // A pid that is gone gives ESRCH: nothing to stop.
    let _ = kill_process(p, sig);
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn a_stopped_run_takes_its_children_and_grandchildren_with_it() {
        // A shell with two children: a `sleep`, and a shell that ignores
        // SIGTERM with a `sleep` of its own (they must be killed).
        let mut sh = Command::new("sh")
            .args([
                "-c",
                "sleep 300 & sh -c 'trap \"\" TERM; sleep 300; true' & wait",
            ])
            .spawn()
            .expect("sh");
        let root = sh.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut sleeps = Vec::new();
        while Instant::now() < deadline {
            sleeps = descendants(root);
            if sleeps.len() >= 3 {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        assert!(sleeps.len() >= 3, "the shell's children: {sleeps:?}");
        assert!(sleeps.iter().all(|&p| running(p)));
        stop_descendants(root, Duration::from_millis(300));
        let deadline = Instant::now() + Duration::from_secs(10);
        while sleeps.iter().any(|&p| running(p)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        let left: Vec<_> = sleeps.iter().filter(|&&p| running(p)).collect();
        assert!(left.is_empty(), "still running: {left:?}");
        // With its children gone, the shell's `wait` returns.
        sh.wait().expect("wait");
    }
}
