//! `vrhost rule list|add|del`: the classifier rules, first match wins.

use anyhow::Result;
use hyper::Method;

use super::api::Rule;
use super::client::Answer;
use super::output::{Col, Table, opt};
use super::{ApiArgs, emit, emit_deleted, one_shot};

/// `vrhost rule ...`.
#[derive(Debug, Clone, clap::Args)]
pub struct RuleArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    #[command(subcommand)]
    pub cmd: RuleCmd,
}

/// What to do with rules.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum RuleCmd {
    /// The rules in match order.
    #[command(visible_alias = "ls")]
    List,
    /// Insert a rule: frames matching every given field go to a VR's vNIC.
    Add(RuleAddArgs),
    /// Remove the rule at an index (later rules move up one).
    #[command(visible_alias = "rm")]
    Del {
        /// Its index in `rule list`.
        index: u64,
    },
}

/// `vrhost rule add`.
#[derive(Debug, Clone, clap::Args)]
pub struct RuleAddArgs {
    /// Ingress port.
    #[arg(long)]
    pub port: Option<String>,
    /// Destination prefix (IPv4 destination, or an ARP target address).
    #[arg(long)]
    pub dst: Option<String>,
    /// Source prefix.
    #[arg(long)]
    pub src: Option<String>,
    /// Destination MAC.
    #[arg(long)]
    pub dst_mac: Option<String>,
    /// 802.1Q VLAN id. The frame reaches the VR still tagged: the built-in
    /// router drops tagged frames; only a custom VR that handles the tag
    /// serves a VLAN.
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=4095))]
    pub vlan: Option<u16>,
    /// IP protocol: a number or icmp, tcp, udp.
    #[arg(long, value_parser = parse_proto)]
    pub proto: Option<u8>,
    /// UDP destination port.
    #[arg(long)]
    pub udp_dport: Option<u16>,
    /// Target VR.
    #[arg(long)]
    pub vr: String,
    /// Target vNIC of that VR [default: 0].
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=63))]
    pub vnic: Option<u16>,
    /// Where in the list (0: first) [default: the end].
    #[arg(long)]
    pub position: Option<u64>,
}

impl RuleAddArgs {
    /// The rule to send.
    pub fn rule(&self) -> Rule {
        Rule {
            port: self.port.clone(),
            dst: self.dst.clone(),
            src: self.src.clone(),
            dst_mac: self.dst_mac.clone(),
            vlan: self.vlan,
            proto: self.proto,
            udp_dport: self.udp_dport,
            vr: self.vr.clone(),
            vnic: self.vnic,
            position: self.position,
            index: None,
        }
    }
}

/// `--proto`: a number, or a name of the common ones.
fn parse_proto(s: &str) -> Result<u8, String> {
    match s.to_ascii_lowercase().as_str() {
        "icmp" => Ok(1),
        "tcp" => Ok(6),
        "udp" => Ok(17),
        n => n
            .parse()
            .map_err(|_| format!("{s:?}: a protocol number 0-255 or icmp, tcp, udp")),
    }
}

/// Run `vrhost rule ...`.
///
/// # Errors
/// The daemon cannot be reached or refuses.
pub fn run(args: &RuleArgs) -> Result<()> {
    let api = &args.api;
    let c = one_shot(api)?;
    let print_rules = |a: &Answer| -> Result<()> {
        let rules: Vec<Rule> = a.decode()?;
        Ok(table(&rules).print()?)
    };
    match &args.cmd {
        RuleCmd::List => emit(api, &c.get("/v1/rules")?, print_rules),
        RuleCmd::Add(a) => {
            let answer = c.call(Method::POST, "/v1/rules", Some(&a.rule()))?;
            emit(api, &answer, print_rules)
        }
        RuleCmd::Del { index } => {
            let a = c.call(Method::DELETE, &format!("/v1/rules/{index}"), None::<&()>)?;
            emit_deleted(api, &a, "rule", index)
        }
    }
}

/// Rules as a table, in match order.
pub fn table(rules: &[Rule]) -> Table {
    // A rule from the API has its index; one from a file takes its place.
    let rules: Vec<(u64, &Rule)> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.index.unwrap_or(i as u64), r))
        .collect();
    Table::of(
        &rules,
        &[
            (Col::r("INDEX"), &|(i, _)| i.to_string()),
            (Col::l("PORT"), &|(_, r)| opt(r.port.as_deref())),
            (Col::l("DST"), &|(_, r)| opt(r.dst.as_deref())),
            (Col::l("SRC"), &|(_, r)| opt(r.src.as_deref())),
            (Col::l("DST-MAC"), &|(_, r)| opt(r.dst_mac.as_deref())),
            (Col::r("VLAN"), &|(_, r)| opt(r.vlan)),
            (Col::r("PROTO"), &|(_, r)| opt(r.proto)),
            (Col::r("UDP-DPORT"), &|(_, r)| opt(r.udp_dport)),
            (Col::l("VR"), &|(_, r)| {
                if r.vr.is_empty() { "-" } else { &r.vr }.to_owned()
            }),
            (Col::r("VNIC"), &|(_, r)| r.vnic.unwrap_or(0).to_string()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_rules() {
        let rules: Vec<Rule> = serde_json::from_str(
            r#"[{"index": 0, "port": "p0", "dst": "10.1.0.0/16", "vr": "tenant-a", "vnic": 0},
                {"index": 1, "proto": 17, "udp_dport": 4789, "vr": "tenant-b", "vnic": 1}]"#,
        )
        .unwrap();
        assert_eq!(
            table(&rules).render(),
            "INDEX  PORT  DST          SRC  DST-MAC  VLAN  PROTO  UDP-DPORT  VR        VNIC\n\
             \x20   0  p0    10.1.0.0/16  -    -           -      -          -  tenant-a     0\n\
             \x20   1  -     -            -    -           -     17       4789  tenant-b     1\n"
        );
    }

    #[test]
    fn protocols() {
        assert_eq!(parse_proto("udp"), Ok(17));
        assert_eq!(parse_proto("TCP"), Ok(6));
        assert_eq!(parse_proto("47"), Ok(47));
        assert!(parse_proto("300").is_err());
        assert!(parse_proto("gre").is_err());
    }
}
