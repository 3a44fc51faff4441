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
            date: now_rfc3339(),
        }
    }
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_format() {
        let d = super::now_rfc3339();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
