//! What machine a figure was measured on, for every benchmark's JSON.

use serde::Serialize;

/// Machine facts recorded with each benchmark run.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// CPU model name.
    pub cpu: String,
    /// CPUs available to us.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// UTC time of the run (RFC 3339).
    pub date: String,
}

impl Machine {
    /// Read the facts of this machine.
    pub fn this() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let uts = rustix::system::uname();
        Self {
            hostname: uts.nodename().to_string_lossy().into_owned(),
            cpu,
            cores: vrhost_host::cpu::cpus(),
            kernel: uts.release().to_string_lossy().into_owned(),
            date: crate::fib::utc_now(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_format() {
        let d = crate::fib::utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
