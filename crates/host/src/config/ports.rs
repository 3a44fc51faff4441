//! The checks of the `[[ports]]` tables: a unique name each, an interface
//! where the driver needs one (and no other port's), traffic only for a
//! `mem` port, ring sizes only for an `af_xdp` port.

use std::collections::BTreeMap;

use toml::Spanned;

use super::schema::{Driver, PortConfig, port_rings};
use super::{ConfigError, Source};

/// Check every port; the index of each port by name.
pub(super) fn check_ports(
    ports: &[PortConfig],
    at: &Source,
) -> Result<BTreeMap<String, usize>, ConfigError> {
    let mut port_ix = BTreeMap::new();
    let mut ifaces = BTreeMap::new();
    for (i, p) in ports.iter().enumerate() {
        let n = p.name.get_ref();
        if n.is_empty() || port_ix.insert(n.clone(), i).is_some() {
            return Err(at.err(
                p.name.span(),
                format!("ports[{i}].name"),
                format!("{n:?}: empty or defined twice"),
            ));
        }
        check_interface(i, p, &mut ifaces, at)?;
        check_traffic(i, p, at)?;
        check_rings(i, p, at)?;
    }
    Ok(port_ix)
}

/// An interface for every driver but `mem` and `null`, a valid Linux name,
/// used by no port before it (`ifaces`: interface to port index).
fn check_interface(
    i: usize,
    p: &PortConfig,
    ifaces: &mut BTreeMap<String, usize>,
    at: &Source,
) -> Result<(), ConfigError> {
    let field = || format!("ports[{i}].interface");
    let in_memory = matches!(p.driver, Driver::Mem | Driver::Null);
    match (&p.interface, in_memory) {
        (Some(ifc), true) => Err(at.err(
            ifc.span(),
            field(),
            format!("a {} port has no interface", p.driver.name()),
        )),
        (None, false) => Err(at.err(
            p.name.span(),
            field(),
            format!("a {} port needs an interface", p.driver.name()),
        )),
        (Some(ifc), false) => {
            let ifn = ifc.get_ref();
            if ifn.is_empty() || ifn.len() > 15 {
                return Err(at.err(ifc.span(), field(), format!("{ifn:?}: 1-15 characters")));
            }
            if ifaces.insert(ifn.clone(), i).is_some() {
                return Err(at.err(ifc.span(), field(), format!("{ifn:?} used by two ports")));
            }
            Ok(())
        }
        (None, true) => Ok(()),
    }
}

/// A `traffic` table only on a `mem` port, and one the generator takes.
fn check_traffic(i: usize, p: &PortConfig, at: &Source) -> Result<(), ConfigError> {
    let field = || format!("ports[{i}].traffic");
    match (&p.traffic, p.driver) {
        (Some(g), Driver::Mem) => {
            g.get_ref()
                .mem_config()
                .map_err(|m| at.err(g.span(), field(), m))?;
            Ok(())
        }
        (Some(g), _) => Err(at.err(g.span(), field(), "only a mem port generates".into())),
        (None, _) => Ok(()),
    }
}

/// A port's `field`, set at `span`, is refused unless the port's driver
/// is `only`.
fn only_on(
    i: usize,
    p: &PortConfig,
    at: &Source,
    only: Driver,
    field: &str,
    span: Option<std::ops::Range<usize>>,
) -> Result<(), ConfigError> {
    match span {
        Some(span) if p.driver != only => Err(at.err(
            span,
            format!("ports[{i}].{field}"),
            format!("only an {} port has {field}", only.name()),
        )),
        _ => Ok(()),
    }
}

/// `tx`, `ring_size` and `frames` only on an `af_xdp` port, `rx_ring`
/// only on an `af_packet` one, and sizes its driver takes.
fn check_rings(i: usize, p: &PortConfig, at: &Source) -> Result<(), ConfigError> {
    let tx = p.tx.as_ref().map(Spanned::span);
    only_on(i, p, at, Driver::AfXdp, "tx", tx)?;
    let ring_size = p.ring_size.as_ref().map(Spanned::span);
    only_on(i, p, at, Driver::AfXdp, "ring_size", ring_size)?;
    let frames = p.frames.as_ref().map(Spanned::span);
    only_on(i, p, at, Driver::AfXdp, "frames", frames)?;
    let rx_ring = p.rx_ring.as_ref().map(Spanned::span);
    only_on(i, p, at, Driver::AfPacket, "rx_ring", rx_ring)?;
    if p.driver == Driver::AfXdp
        && let Err(m) = port_rings(p).af_xdp().check()
    {
        // The driver's message starts with the field at fault.
        let (field, set) = if m.starts_with("frames") {
            ("frames", &p.frames)
        } else {
            ("ring_size", &p.ring_size)
        };
        return Err(at.err(
            set.as_ref().map_or(p.name.span(), Spanned::span),
            format!("ports[{i}].{field}"),
            m,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schema::PortTx;
    use crate::config::tests::assert_refused;

    /// Check the ports of `src` (`[[ports]]` tables only).
    fn check(src: &str) -> Result<BTreeMap<String, usize>, String> {
        #[derive(serde::Deserialize)]
        struct Ports {
            ports: Vec<PortConfig>,
        }
        let p: Ports = toml::from_str(src).expect("the schema");
        let at = Source {
            src,
            file: "p.toml",
        };
        check_ports(&p.ports, &at).map_err(|e| e.to_string())
    }

    const TWO: &str = r#"
[[ports]]
name = "p0"
driver = "af_xdp"
interface = "veth0"
ring_size = 1024

[[ports]]
name = "gen"
driver = "mem"
traffic = { frame_bytes = 128 }
"#;

    #[test]
    fn good_ports_get_an_index_each() {
        let ix = check(TWO).unwrap();
        assert_eq!(
            ix.into_iter().collect::<Vec<_>>(),
            [("gen".to_string(), 1), ("p0".to_string(), 0)]
        );
        check("[[ports]]\nname = \"n\"\ndriver = \"null\"").unwrap();
    }

    #[test]
    fn each_error_names_its_port_and_key() {
        for (from, to, want) in [
            (
                "\"gen\"",
                "\"p0\"",
                "p.toml:9: ports[1].name: \"p0\": empty or defined twice",
            ),
            (
                "\"gen\"",
                "\"\"",
                "ports[1].name: \"\": empty or defined twice",
            ),
            (
                "driver = \"mem\"",
                "driver = \"mem\"\ninterface = \"eth9\"",
                "p.toml:11: ports[1].interface: a mem port has no interface",
            ),
            (
                "interface = \"veth0\"\n",
                "",
                "p.toml:3: ports[0].interface: a af_xdp port needs an interface",
            ),
            (
                "\"veth0\"",
                "\"a-name-of-16-chr\"",
                "p.toml:5: ports[0].interface: \"a-name-of-16-chr\": 1-15 characters",
            ),
            (
                "\"veth0\"",
                "\"\"",
                "ports[0].interface: \"\": 1-15 characters",
            ),
            (
                "driver = \"mem\"\ntraffic",
                "driver = \"tap\"\ninterface = \"veth0\"\ntraffic",
                "p.toml:11: ports[1].interface: \"veth0\" used by two ports",
            ),
            (
                "driver = \"mem\"\ntraffic",
                "driver = \"tap\"\ninterface = \"tap0\"\ntraffic",
                "p.toml:12: ports[1].traffic: only a mem port generates",
            ),
            (
                "frame_bytes = 128",
                "frame_bytes = 9",
                "p.toml:11: ports[1].traffic: ",
            ),
            (
                "driver = \"af_xdp\"",
                "driver = \"af_packet\"",
                "p.toml:6: ports[0].ring_size: only an af_xdp port has ring_size",
            ),
            (
                "driver = \"af_xdp\"\ninterface = \"veth0\"\nring_size = 1024",
                "driver = \"af_packet\"\ninterface = \"veth0\"\nframes = 4096",
                "p.toml:6: ports[0].frames: only an af_xdp port has frames",
            ),
            (
                "ring_size = 1024",
                "ring_size = 1000",
                "p.toml:6: ports[0].ring_size: ring_size 1000 is not a power of two",
            ),
            (
                "ring_size = 1024",
                "rx_ring = \"frames\"",
                "p.toml:6: ports[0].rx_ring: only an af_packet port has rx_ring",
            ),
            (
                "driver = \"af_xdp\"\ninterface = \"veth0\"\nring_size = 1024",
                "driver = \"af_packet\"\ninterface = \"veth0\"\ntx = \"socket\"",
                "p.toml:6: ports[0].tx: only an af_xdp port has tx",
            ),
        ] {
            let src = TWO.replacen(from, to, 1);
            assert_refused(check(&src), want, &src);
        }
    }

    #[test]
    fn an_af_xdp_port_takes_tx() {
        for (tx, want) in [
            ("socket", PortTx::Socket),
            ("xdp", PortTx::Xdp),
            ("auto", PortTx::Auto),
        ] {
            let src = TWO.replacen("ring_size = 1024", &format!("tx = \"{tx}\""), 1);
            assert!(check(&src).is_ok(), "{src}");
            let p: PortConfig = toml::from_str(&format!(
                "name = \"p\"\ndriver = \"af_xdp\"\ninterface = \"v\"\ntx = \"{tx}\""
            ))
            .unwrap();
            assert_eq!(port_rings(&p).tx, want);
        }
        let e = toml::from_str::<PortConfig>("name = \"p\"\ndriver = \"af_xdp\"\ntx = \"skb\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `skb`"), "{e}");
        let x = PortTx::Xdp;
        assert_eq!(
            crate::config::schema::PortRings {
                tx: x,
                ..Default::default()
            }
            .af_xdp()
            .tx,
            vrhost_io::af_xdp::TxPath::Xdp
        );
    }

    #[test]
    fn an_af_packet_port_takes_rx_ring() {
        let src = TWO.replacen(
            "driver = \"af_xdp\"\ninterface = \"veth0\"\nring_size = 1024",
            "driver = \"af_packet\"\ninterface = \"veth0\"\nrx_ring = \"frames\"",
            1,
        );
        assert!(check(&src).is_ok(), "{src}");
        let p: PortConfig = toml::from_str(
            "name = \"u\"\ndriver = \"af_packet\"\ninterface = \"u0\"\nrx_ring = \"frames\"",
        )
        .unwrap();
        let cfg = crate::config::schema::port_rings(&p).af_packet();
        assert_eq!(cfg.rx_mode, vrhost_io::af_packet::RxMode::Frames);
        let bad = "name = \"u\"\ndriver = \"af_packet\"\nrx_ring = \"v9\"";
        assert!(toml::from_str::<PortConfig>(bad).is_err());
    }
}
