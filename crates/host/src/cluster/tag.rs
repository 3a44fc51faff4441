//! PdP's tag, in the 24 bits of a VXLAN VNI.
//!
//! ```text
//!  23            16 15             8  7  6           0
//! +----------------+----------------+---+-------------+
//! |   VR id (1..)  |  output port   | L |  instance   |
//! +----------------+----------------+---+-------------+
//! ```
//!
//! - VR id: the VR's number in the cluster (1..=255; 0 is refused, so a
//!   plain VXLAN VNI of a small number is never taken for a tag);
//! - output port: the dispatcher's port the frame leaves by, on the way
//!   back (0..=254; 255 is refused);
//! - L: local delivery, to the dispatcher's own control plane instead of
//!   a port (the port field is then 0);
//! - instance: the VR instance on the engine (0..=127).
//!
//! On the way to an engine the tag names the port the frame came in by;
//! on the way back, the port it leaves by. A tag is checked on receipt
//! ([`Tag::check`]): a frame whose tag does not parse, names a VR the
//! receiver does not know, a port the VR has no vNIC on, or an instance
//! it does not run is a counted drop.

/// Most instances a tag can name.
pub const MAX_INSTANCE: u8 = 0x7f;

/// Highest output port a tag can name.
pub const MAX_PORT: u8 = 254;

/// A decoded tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    /// The VR's number in the cluster (1..=255).
    pub vr: u8,
    /// The dispatcher port (0..=254).
    pub port: u8,
    /// Local delivery to the dispatcher's control plane.
    pub local: bool,
    /// The instance on the engine (0..=127).
    pub instance: u8,
}

/// Why a tag was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    /// VR id 0.
    #[error("VR id 0")]
    NoVr,
    /// Port 255, or a port with local delivery.
    #[error("bad output port")]
    BadPort,
    /// Instance over 127.
    #[error("instance over 127")]
    BadInstance,
    /// More than 24 bits.
    #[error("more than 24 bits")]
    TooWide,
    /// A VR the receiver does not host or dispatch.
    #[error("unknown VR")]
    UnknownVr,
    /// A port the VR has no vNIC on.
    #[error("port not the VR's")]
    ForeignPort,
    /// An instance the VR does not run.
    #[error("instance not run")]
    NoInstance,
}

impl Tag {
    /// The VNI of this tag.
    ///
    /// # Errors
    /// A field out of its range.
    pub fn to_vni(self) -> Result<u32, TagError> {
        if self.vr == 0 {
            return Err(TagError::NoVr);
        }
        if self.port > MAX_PORT || (self.local && self.port != 0) {
            return Err(TagError::BadPort);
        }
        if self.instance > MAX_INSTANCE {
            return Err(TagError::BadInstance);
        }
        Ok(u32::from(self.vr) << 16
            | u32::from(self.port) << 8
            | u32::from(self.local) << 7
            | u32::from(self.instance))
    }

    /// The tag in `vni`.
    ///
    /// # Errors
    /// A VNI over 24 bits, VR id 0, port 255, or local delivery with a
    /// port.
    #[inline]
    pub fn from_vni(vni: u32) -> Result<Tag, TagError> {
        if vni > 0x00ff_ffff {
            return Err(TagError::TooWide);
        }
        let t = Tag {
            vr: (vni >> 16) as u8,
            port: (vni >> 8) as u8,
            local: vni & 0x80 != 0,
            instance: (vni & 0x7f) as u8,
        };
        if t.vr == 0 {
            return Err(TagError::NoVr);
        }
        if t.port > MAX_PORT || (t.local && t.port != 0) {
            return Err(TagError::BadPort);
        }
        Ok(t)
    }

    /// Check a received tag against what the receiver knows of its VR:
    /// `ports`, one bit per dispatcher port the VR has a vNIC on (ports 64
    /// and above: none), and `instances`, how many it runs. `None`: the
    /// receiver does not know the VR.
    ///
    /// # Errors
    /// Which of the three does not hold.
    #[inline]
    pub fn check(self, known: Option<(u64, u8)>) -> Result<Tag, TagError> {
        let Some((ports, instances)) = known else {
            return Err(TagError::UnknownVr);
        };
        if !self.local && (self.port >= 64 || ports & (1 << self.port) == 0) {
            return Err(TagError::ForeignPort);
        }
        if self.instance >= instances {
            return Err(TagError::NoInstance);
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_valid_tag_comes_back_from_its_vni() {
        for vr in [1u8, 7, 255] {
            for port in [0u8, 3, 254] {
                for instance in [0u8, 5, 127] {
                    let t = Tag {
                        vr,
                        port,
                        local: false,
                        instance,
                    };
                    assert_eq!(Tag::from_vni(t.to_vni().unwrap()), Ok(t));
                }
            }
        }
        let l = Tag {
            vr: 9,
            port: 0,
            local: true,
            instance: 2,
        };
        assert_eq!(l.to_vni(), Ok(0x09_00_82));
        assert_eq!(Tag::from_vni(0x09_00_82), Ok(l));
    }

    #[test]
    fn bad_tags_are_refused_with_their_reason() {
        assert_eq!(Tag::from_vni(0x00_01_00), Err(TagError::NoVr));
        assert_eq!(Tag::from_vni(0x01_ff_00), Err(TagError::BadPort));
        assert_eq!(Tag::from_vni(0x01_02_80), Err(TagError::BadPort));
        assert_eq!(Tag::from_vni(0x0100_0000), Err(TagError::TooWide));
        let t = |vr, port, instance| Tag {
            vr,
            port,
            local: false,
            instance,
        };
        assert_eq!(t(0, 1, 1).to_vni(), Err(TagError::NoVr));
        assert_eq!(t(1, 255, 1).to_vni(), Err(TagError::BadPort));
        assert_eq!(t(1, 1, 128).to_vni(), Err(TagError::BadInstance));
    }

    #[test]
    fn a_tag_for_a_port_or_instance_the_vr_lacks_is_refused() {
        let t = Tag::from_vni(0x03_02_01).unwrap();
        // The VR has ports 0 and 2, and two instances.
        assert_eq!(t.check(Some((0b101, 2))), Ok(t));
        assert_eq!(t.check(None), Err(TagError::UnknownVr));
        assert_eq!(t.check(Some((0b011, 2))), Err(TagError::ForeignPort));
        assert_eq!(t.check(Some((0b101, 1))), Err(TagError::NoInstance));
        let far = Tag::from_vni(0x03_50_00).unwrap();
        assert_eq!(far.check(Some((u64::MAX, 1))), Err(TagError::ForeignPort));
    }
}
