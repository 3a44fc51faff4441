//! `vrhost apply FILE [--dry-run]` (replace the whole config, applied as a
//! diff) and `vrhost config` (the config in force).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use hyper::Method;

use super::api::{ApplyRequest, ApplyResult, ConfigDoc};
use super::{ApiArgs, emit, one_shot};

/// `vrhost apply`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    /// A whole daemon config (TOML), as `vrhost daemon --config` reads.
    pub file: PathBuf,
    /// Only show what would change.
    #[arg(long, short = 'n')]
    pub dry_run: bool,
}

/// `vrhost config`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Run `vrhost apply`.
///
/// # Errors
/// The file cannot be read, the daemon cannot be reached or refuses the
/// config (nothing is then changed).
pub fn apply(args: &ApplyArgs) -> Result<()> {
    let toml = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let req = ApplyRequest {
        toml,
        dry_run: args.dry_run,
    };
    let a = one_shot(&args.api)?
        .call(Method::POST, "/v1/apply", Some(&req))
        .with_context(|| format!("applying {}", args.file.display()))?;
    emit(&args.api, &a, |a| {
        let r: ApplyResult = a.decode()?;
        Ok(super::output::out(&render_apply(&r))?)
    })
}

/// The diff of an apply, for a person: `+` added, `-` removed, `~`
/// restarted, `*` rescaled in place, `>` moved between the slow and the
/// fast path, `=` unchanged.
pub fn render_apply(r: &ApplyResult) -> String {
    let mut o = String::new();
    if r.dry_run {
        let _ = writeln!(
            o,
            "dry run: nothing applied (generation stays {})",
            r.generation
        );
    } else {
        let _ = writeln!(o, "applied: generation {}", r.generation);
    }
    for (sign, what, names, note) in [
        ("+", "vr", &r.added, "added"),
        ("-", "vr", &r.removed, "removed"),
        ("~", "vr", &r.restarted, "restarted"),
        ("*", "vr", &r.rescaled, "instances changed in place"),
        (">", "vr", &r.moved, "moved to its new path"),
        ("+", "port", &r.ports_added, "added"),
        ("-", "port", &r.ports_removed, "removed"),
    ] {
        for n in names {
            let _ = writeln!(o, "{sign} {what:<4} {n:<32} {note}");
        }
    }
    if !r.unchanged.is_empty() {
        let _ = writeln!(
            o,
            "= {} VR{} unchanged: {}",
            r.unchanged.len(),
            if r.unchanged.len() == 1 { "" } else { "s" },
            r.unchanged.join(", ")
        );
    }
    let changes = r.added.len()
        + r.removed.len()
        + r.restarted.len()
        + r.rescaled.len()
        + r.moved.len()
        + r.ports_added.len()
        + r.ports_removed.len();
    if changes == 0 {
        let _ = writeln!(o, "no VR or port changes");
    }
    let _ = writeln!(o, "rules: {}", r.rules);
    o
}

/// Run `vrhost config`: the TOML in force on stdout (its generation as a
/// comment first, so the output is still a config `apply` takes).
///
/// # Errors
/// The daemon cannot be reached.
pub fn config(args: &ConfigArgs) -> Result<()> {
    let a = one_shot(&args.api)?.get("/v1/config")?;
    emit(&args.api, &a, |a| {
        let c: ConfigDoc = a.decode()?;
        let mut text = format!("# generation {}\n{}", c.generation, c.toml);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        Ok(super::output::out(&text)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_diff() {
        let r: ApplyResult = serde_json::from_str(
            r#"{"generation": 4, "dry_run": true, "added": ["tenant-c"], "removed": ["tenant-b"],
                "restarted": ["tenant-a"], "unchanged": ["x", "y"], "ports_added": ["p2"],
                "ports_removed": [], "rules": 6}"#,
        )
        .unwrap();
        assert_eq!(
            render_apply(&r),
            "dry run: nothing applied (generation stays 4)\n\
             + vr   tenant-c                         added\n\
             - vr   tenant-b                         removed\n\
             ~ vr   tenant-a                         restarted\n\
             + port p2                               added\n\
             = 2 VRs unchanged: x, y\n\
             rules: 6\n"
        );
        let r = ApplyResult {
            generation: 5,
            unchanged: vec!["a".into()],
            rules: 2,
            ..ApplyResult::default()
        };
        assert_eq!(
            render_apply(&r),
            "applied: generation 5\n= 1 VR unchanged: a\nno VR or port changes\nrules: 2\n"
        );
    }
}
