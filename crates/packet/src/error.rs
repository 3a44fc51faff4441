//! The one error type of the parsers.

/// Why a byte string is not the header a parser expected.
///
/// Returned by every `new_checked`, every `Repr::parse` and by
/// [`FlowKey::extract`](crate::FlowKey::extract). The data path drops and
/// counts these; it never logs them one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The buffer ends before the header (or the length a header claims).
    #[error("truncated: buffer too short for the header or its length field")]
    Truncated,
    /// The version nibble is not the header's: 4 for IPv4, 6 for IPv6.
    #[error("IP version does not match the header (4 for IPv4, 6 for IPv6)")]
    BadVersion,
    /// The IPv4 header length is below 5 words.
    #[error("IPv4 IHL below 5")]
    BadIhl,
    /// The IPv4 total length is below the header length.
    #[error("IPv4 total length below the header length")]
    BadTotalLength,
    /// The UDP length field is below 8.
    #[error("UDP length below the 8-byte header")]
    BadUdpLength,
    /// A checksum does not verify.
    #[error("bad checksum")]
    BadChecksum,
    /// The frame does not carry the expected protocol (e.g. not IPv4).
    #[error("wrong EtherType")]
    WrongEtherType,
    /// The IPv4 packet does not carry the expected transport protocol.
    #[error("wrong IP protocol")]
    WrongProtocol,
    /// An ARP packet's address lengths do not match its hardware and
    /// protocol types (6 and 4 for Ethernet and IPv4).
    #[error("ARP address lengths do not match Ethernet/IPv4")]
    BadArpAddressLength,
    /// Valid on the wire but not representable by the `Repr` asked for
    /// (IPv4 options, fragments), or
    /// a protocol combination not handled (ARP for other than Ethernet/IPv4).
    #[error("header feature not supported by this representation")]
    Unsupported,
    /// An IPv6 extension header chain longer than the walk allows, or
    /// with a hop-by-hop header that is not first (RFC 8200 4.1).
    #[error("bad IPv6 extension header chain")]
    BadExtHeader,
    /// A neighbour discovery message with an option of length 0 or one
    /// that runs past the message (RFC 4861 4.6).
    #[error("bad neighbour discovery option")]
    BadNdOption,
    /// A VXLAN header without its I flag: no valid VNI (RFC 7348 5).
    #[error("VXLAN header without the I flag")]
    BadVxlanFlags,
    /// An IPv4 fragment where a whole packet is needed (a tunnel's outer
    /// header: vrhost does not reassemble).
    #[error("IPv4 fragment")]
    Fragment,
}
