//! A custom VR: a two-port bridge with a UDP port filter.
//!
//! Frames entering vNIC 0 leave on vNIC 1 and back; UDP datagrams to a
//! blocked destination port are dropped (counted as `filtered`). Its whole
//! data plane is the `process` function below; the SDK does the rest.
//!
//! Config (the VR's `config` in the host): `{"block_udp_ports": [53, 123]}`.

use serde::Deserialize;
use vrhost_packet::FlowKey;
use vrhost_sdk::{DropReason, Packet, Verdict, Vr};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    block_udp_ports: Vec<u16>,
}

struct FilterBridge {
    blocked: Vec<u16>,
}

impl Vr for FilterBridge {
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        let Ok(key) = FlowKey::extract(pkt.data()) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        if key.protocol == 17 && self.blocked.contains(&key.dport) {
            return Verdict::Drop(DropReason::Filtered);
        }
        Verdict::Forward(pkt.rx_vnic() ^ 1)
    }
}

fn main() -> std::process::ExitCode {
    vrhost_sdk::runtime::main(|hello| {
        let cfg: Config =
            serde_json::from_value(hello.config.clone()).map_err(|e| format!("config: {e}"))?;
        Ok(FilterBridge {
            blocked: cfg.block_udp_ports,
        })
    })
}
