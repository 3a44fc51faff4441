//! The command-line client of a running `vrhost daemon`, over its HTTP/JSON
//! API (`api/openapi.yaml`): `vr`, `rule`, `route`, `stats`, `apply`,
//! `config`, `health`, `top`, `capture`, and `completions`.
//!
//! Every client command takes `--api ADDR` (a unix socket path, default
//! [`client::DEFAULT_SOCKET`], or `http://HOST:PORT`; env `VRHOST_API`),
//! `--token TOKEN` (env `VRHOST_TOKEN`) and `-o table|json`. They are
//! options of these commands, not of `vrhost` itself, so they never clash
//! with the options of `daemon` or `lab`; they may stand anywhere after the
//! command word (`vrhost vr -o json list`, `vrhost vr list -o json`).
//!
//! It owns what a person sees (tables, reports, the live view) and the
//! client side of the API; the daemon side lives in the daemon crate.

pub mod api;
pub mod capture;
pub mod cluster;
pub use vrhost_client as client;
pub mod config;
pub mod output;
pub mod route;
pub mod rule;
pub mod stats;
pub mod top;
pub mod vr;

use std::time::Duration;

use anyhow::Result;
use clap_complete::Shell;

use client::{Answer, Client, DEFAULT_SOCKET, Endpoint};
use output::Format;

/// How to reach the daemon, and how to print.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// The daemon's API: a unix socket path, HOST:PORT or http://HOST:PORT
    /// [default: /run/vrhost/api.sock]
    #[arg(long, global = true, env = "VRHOST_API", value_name = "ADDR")]
    pub api: Option<String>,
    /// Bearer token (the daemon needs one over TCP).
    #[arg(
        long,
        global = true,
        env = "VRHOST_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Output: aligned tables, or the API's JSON.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

impl ApiArgs {
    /// The endpoint `--api` names.
    ///
    /// # Errors
    /// A malformed address.
    pub fn endpoint(&self) -> Result<Endpoint> {
        Ok(Endpoint::parse(
            self.api.as_deref().unwrap_or(DEFAULT_SOCKET),
        )?)
    }

    /// A client of that endpoint.
    ///
    /// # Errors
    /// A malformed address, or the runtime cannot start.
    pub fn client(&self) -> Result<Client> {
        Ok(Client::new(self.endpoint()?, self.token.clone())?)
    }

    /// Whether `-o json` was given.
    pub fn json(&self) -> bool {
        self.output == Format::Json
    }
}

/// A client for one-shot commands: generous timeout, so a stuck daemon
/// does not hang a script forever, long enough for a bulk change.
fn one_shot(api: &ApiArgs) -> Result<Client> {
    Ok(api.client()?.with_timeout(Duration::from_secs(300)))
}

/// Print the API's answer as its JSON (`-o json`), or as text by `table`.
fn emit(api: &ApiArgs, a: &Answer, table: impl FnOnce(&Answer) -> Result<()>) -> Result<()> {
    if api.json() {
        Ok(output::out(&(a.pretty() + "\n"))?)
    } else {
        table(a)
    }
}

/// `-o json` of an answer that may be empty (a 204): the answer, or
/// `fallback` so a script always gets JSON.
fn emit_json_or(a: &Answer, fallback: serde_json::Value) -> Result<()> {
    if a.is_empty() {
        output::print_json(&fallback)?;
    } else {
        output::out(&(a.pretty() + "\n"))?;
    }
    Ok(())
}

/// Say that `what` `id` is deleted: with `-o json` the answer, or
/// `{"deleted": id}` if it is empty; else `deleted WHAT ID`.
fn emit_deleted<I>(api: &ApiArgs, a: &Answer, what: &str, id: &I) -> Result<()>
where
    I: std::fmt::Display + serde::Serialize,
{
    if api.json() {
        emit_json_or(a, serde_json::json!({ "deleted": id }))
    } else {
        println!("deleted {what} {id}");
        Ok(())
    }
}

/// `vrhost completions SHELL`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh or fish.
    #[arg(value_parser = ["bash", "zsh", "fish"])]
    pub shell: String,
}

/// Print the completion script of `cmd` for a shell on stdout.
///
/// # Errors
/// An unknown shell (clap already refuses it).
pub fn completions(args: &CompletionsArgs, mut cmd: clap::Command) -> Result<()> {
    let shell = match args.shell.as_str() {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        s => anyhow::bail!("no completions for shell {s:?} (bash, zsh, fish)"),
    };
    let name = cmd.get_name().to_owned();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    output::out(&String::from_utf8_lossy(&script))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::{Cli, Cmd};

    fn parse(line: &str) -> Result<Cmd, clap::Error> {
        Cli::try_parse_from(line.split_whitespace()).map(|c| c.cmd)
    }

    #[test]
    fn command_tree_is_consistent() {
        // Duplicate names, bad defaults, conflicts naming missing args.
        Cli::command().debug_assert();
    }

    #[test]
    fn api_options_anywhere_after_the_command() {
        for line in [
            "vrhost vr list -o json --api http://127.0.0.1:8080 --token t",
            "vrhost vr -o json --api http://127.0.0.1:8080 --token t list",
        ] {
            let Ok(Cmd::Vr(a)) = parse(line) else {
                panic!("{line}")
            };
            assert!(matches!(a.cmd, vr::VrCmd::List));
            assert!(a.api.json());
            assert_eq!(a.api.token.as_deref(), Some("t"));
            assert!(matches!(
                a.api.endpoint().unwrap(),
                Endpoint::Tcp { port: 8080, .. }
            ));
        }
        let Ok(Cmd::Stats(a)) = parse("vrhost stats") else {
            panic!()
        };
        assert_eq!(a.api.output, Format::Table);
        assert!(parse("vrhost stats -o yaml").is_err());
    }

    #[test]
    fn api_options_read_the_environment() {
        let cmd = Cli::command();
        let vr = cmd.find_subcommand("vr").unwrap();
        let env = |id: &str| {
            vr.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
        };
        assert_eq!(env("api").as_deref(), Some("VRHOST_API"));
        assert_eq!(env("token").as_deref(), Some("VRHOST_TOKEN"));
    }

    #[test]
    fn vr_commands() {
        assert!(matches!(
            parse("vrhost vr show tenant-a"),
            Ok(Cmd::Vr(vr::VrArgs { cmd: vr::VrCmd::Show { name }, .. })) if name == "tenant-a"
        ));
        assert!(matches!(
            parse("vrhost vr add a.toml"),
            Ok(Cmd::Vr(vr::VrArgs {
                cmd: vr::VrCmd::Add { .. },
                ..
            }))
        ));
        assert!(matches!(
            parse("vrhost vr rm a"),
            Ok(Cmd::Vr(vr::VrArgs {
                cmd: vr::VrCmd::Del { .. },
                ..
            }))
        ));
        assert!(matches!(
            parse("vrhost vr restart a"),
            Ok(Cmd::Vr(vr::VrArgs { cmd: vr::VrCmd::Restart { name }, .. })) if name == "a"
        ));
        assert!(parse("vrhost vr show").is_err());
        assert!(parse("vrhost vr restart").is_err());
    }

    #[test]
    fn route_commands() {
        let Ok(Cmd::Route(a)) = parse("vrhost route add tenant-a 192.0.2.0/24 via 10.1.1.2 dev 1")
        else {
            panic!()
        };
        let route::RouteCmd::Add { vr, prefix, how } = a.cmd else {
            panic!()
        };
        assert_eq!((vr.as_str(), prefix.as_str()), ("tenant-a", "192.0.2.0/24"));
        assert_eq!(how, ["via", "10.1.1.2", "dev", "1"]);
        assert!(parse("vrhost route add tenant-a 192.0.2.0/24").is_err());

        let Ok(Cmd::Route(a)) = parse("vrhost route list tenant-a --offset 10 --limit 5") else {
            panic!()
        };
        assert!(matches!(
            a.cmd,
            route::RouteCmd::List {
                offset: 10,
                limit: 5,
                all: false,
                ..
            }
        ));
        assert!(parse("vrhost route list a --all --offset 3").is_err());
        assert!(parse("vrhost route list a --limit 0").is_err());
        assert!(matches!(
            parse("vrhost route del a 192.0.2.0/24"),
            Ok(Cmd::Route(route::RouteArgs {
                cmd: route::RouteCmd::Del { .. },
                ..
            }))
        ));
    }

    #[test]
    fn route_import_with_and_without_a_vr() {
        let import = |line| match parse(line) {
            Ok(Cmd::Route(route::RouteArgs {
                cmd: route::RouteCmd::Import(i),
                ..
            })) => Ok(i),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        // As before the API: a file only, measured here.
        let i = import("vrhost route import table.gz --format ipasn --json").unwrap();
        assert_eq!(i.targets, ["table.gz"]);
        assert!(i.json);
        // Into a VR.
        let i = import("vrhost route import tenant-a table.gz --via 10.1.1.2 --vnic 1").unwrap();
        assert_eq!(i.targets, ["tenant-a", "table.gz"]);
        assert_eq!(i.via, Some("10.1.1.2".parse().unwrap()));
        assert_eq!((i.vnic, i.chunk), (Some(1), route::DEFAULT_CHUNK));
        let i = import("vrhost route import a t --nexthop-mod 4 --chunk 500").unwrap();
        assert_eq!((i.nexthop_mod, i.chunk), (Some(4), 500));
        assert!(import("vrhost route import a b c").is_err());
        assert!(import("vrhost route import").is_err());
        assert!(import("vrhost route import a t --via 10.0.0.1 --nexthop-mod 2").is_err());
        assert!(
            import("vrhost route import a t --vnic 1").is_err(),
            "--vnic needs --via"
        );
        assert!(import("vrhost route import a t --nexthop-mod 0").is_err());
    }

    #[test]
    fn rule_commands() {
        let Ok(Cmd::Rule(a)) = parse(
            "vrhost rule add --vr a --port p0 --dst 10.0.0.0/8 --proto udp --udp-dport 53 --vnic 1 --position 0",
        ) else {
            panic!()
        };
        let rule::RuleCmd::Add(add) = a.cmd else {
            panic!()
        };
        let r = add.rule();
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"port": "p0", "dst": "10.0.0.0/8", "proto": 17, "udp_dport": 53,
                               "vr": "a", "vnic": 1, "position": 0})
        );
        assert!(
            parse("vrhost rule add --dst 10.0.0.0/8").is_err(),
            "--vr is required"
        );
        assert!(parse("vrhost rule add --vr a --vlan 5000").is_err());
        assert!(parse("vrhost rule add --vr a --vnic 64").is_err());
        assert!(matches!(
            parse("vrhost rule del 3"),
            Ok(Cmd::Rule(rule::RuleArgs {
                cmd: rule::RuleCmd::Del { index: 3 },
                ..
            }))
        ));
    }

    #[test]
    fn other_commands() {
        assert!(matches!(
            parse("vrhost apply new.toml --dry-run"),
            Ok(Cmd::Apply(config::ApplyArgs { dry_run: true, .. }))
        ));
        assert!(matches!(parse("vrhost config -o json"), Ok(Cmd::Config(_))));
        assert!(matches!(parse("vrhost health"), Ok(Cmd::Health(_))));
        let Ok(Cmd::Top(t)) = parse("vrhost top -i 0.5 --once") else {
            panic!()
        };
        assert_eq!((t.interval, t.once), (0.5, true));
        assert!(parse("vrhost top -i 0").is_err());
        assert!(matches!(
            parse("vrhost completions zsh"),
            Ok(Cmd::Completions(_))
        ));
        assert!(parse("vrhost completions powershell").is_err());
    }

    #[test]
    fn completion_scripts() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "vrhost", &mut out);
            let s = String::from_utf8(out).unwrap();
            assert!(s.contains("vrhost") && s.contains("import"), "{shell}");
        }
    }
}
