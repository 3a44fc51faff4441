//! Peer messages: small control messages between the instances of one VR
//! (a route learned by one instance, told to the others), carried by the
//! control rings of the region and relayed by the host, as in LVRM's
//! control queues.
//!
//! An instance pushes a message to its `CtrlOut` ring, addressed to one
//! instance or to all the others; the host's relay (`vrhost_host::relay`)
//! pops it, checks it, rewrites the address into the sender's number and
//! pushes it to the destination's `CtrlIn` ring. The runtime hands both
//! rings to the SDK's `Vr::peers` once per round, before the data
//! rings, so messages overtake packets.
//!
//! # Wire format
//!
//! A message is exactly [`MSG_WORDS`] (16) `u32` ring entries, pushed with
//! one ring push so that it is published whole:
//!
//! ```text
//! word 0      header: bits 0..8   MAGIC (0xA7; another format takes another magic)
//!                     bits 8..16  payload length in bytes, 0..=60
//!                     bits 16..32 peer: in CtrlOut the destination instance,
//!                                 or ALL (0xFFFF) for every other live instance;
//!                                 in CtrlIn the source instance
//! words 1..16 payload, 4 bytes per word, little-endian; bytes past the
//!             length are zero when encoded here and ignored when decoded
//! ```
//!
//! Both ends treat what they read from a ring as untrusted: [`decode_to`]
//! and [`decode_from`] validate the magic, the length and the peer (against
//! the VR's instance count) and return a [`WireError`], never panic. After
//! a message that does not decode, the reader discards everything ready in
//! that ring to find the start of a message again.
//!
//! # Capacity
//!
//! A control ring of `ctrl_entries` words holds `ctrl_entries / 16`
//! messages (64 with the default 1024). A ring of fewer than 16 entries
//! holds none: every send is refused with [`PeerError::Full`]. A full ring
//! never blocks: the sender is told [`PeerError::Full`] and may try again
//! on a later round; the relay drops (and counts) a message whose
//! destination ring is full.

use vrhost_shm::layout::MAX_INSTANCES;
use vrhost_shm::{Consumer, RingError};

/// Ring entries per message.
pub const MSG_WORDS: usize = 16;

/// Most payload bytes per message: the 15 words after the header.
pub const MAX_PAYLOAD: usize = 4 * (MSG_WORDS - 1);

/// The header's first byte; a message without it is refused.
pub const MAGIC: u8 = 0xA7;

/// The peer field of a message to every other live instance.
pub const ALL: u16 = u16::MAX;

/// Bit positions in the header word.
mod field {
    /// The magic byte.
    pub const MAGIC_SHIFT: u32 = 0;
    /// The payload length.
    pub const LEN_SHIFT: u32 = 8;
    /// The peer (destination or source).
    pub const PEER_SHIFT: u32 = 16;
}

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerDest {
    /// One instance of the same VR (possibly the sender itself).
    Instance(u16),
    /// Every other instance of the VR that runs when the host relays it.
    All,
}

/// A message read from a ring is not valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The header does not start with [`MAGIC`] (not a message, or the
    /// reader is out of step with the writer).
    #[error("bad magic {found:#04x} (expected {MAGIC:#04x})")]
    BadMagic {
        /// The byte found.
        found: u8,
    },
    /// The payload length is above [`MAX_PAYLOAD`].
    #[error("payload length {len} above {MAX_PAYLOAD}")]
    TooLong {
        /// The length found.
        len: u8,
    },
    /// The peer is not an instance of the VR (or [`ALL`] where a source
    /// is expected).
    #[error("peer {peer} out of range (the VR has {instances} instances)")]
    BadPeer {
        /// The peer field found.
        peer: u16,
        /// Instances of the VR.
        instances: u16,
    },
}

/// A message could not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// The payload is longer than [`MAX_PAYLOAD`].
    #[error("message of {len} bytes, at most {MAX_PAYLOAD} fit")]
    TooLong {
        /// The payload's length.
        len: usize,
    },
    /// The destination is not an instance of the VR.
    #[error("no instance {peer} (the VR has {instances} instances)")]
    NoSuchPeer {
        /// The instance asked for.
        peer: u16,
        /// Instances of the VR (the most a VR may have where the count is
        /// not known: [`encode_to`], [`encode_from`]).
        instances: u16,
    },
    /// The outgoing ring has no room for a message now (the host has not
    /// relayed the earlier ones yet); try again on a later round.
    #[error("control ring full")]
    Full,
}

fn header(peer: u16, len: usize) -> u32 {
    debug_assert!(len <= MAX_PAYLOAD);
    u32::from(MAGIC) << field::MAGIC_SHIFT
        | (len as u32) << field::LEN_SHIFT
        | u32::from(peer) << field::PEER_SHIFT
}

/// The peer field and payload length of a header, magic and length checked.
fn parse_header(word: u32) -> Result<(u16, usize), WireError> {
    let magic = (word >> field::MAGIC_SHIFT) as u8;
    if magic != MAGIC {
        return Err(WireError::BadMagic { found: magic });
    }
    let len = (word >> field::LEN_SHIFT) as u8;
    if usize::from(len) > MAX_PAYLOAD {
        return Err(WireError::TooLong { len });
    }
    Ok(((word >> field::PEER_SHIFT) as u16, usize::from(len)))
}

fn encode(peer: u16, payload: &[u8]) -> Result<[u32; MSG_WORDS], PeerError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(PeerError::TooLong { len: payload.len() });
    }
    let mut words = [0u32; MSG_WORDS];
    words[0] = header(peer, payload.len());
    for (w, chunk) in words[1..].iter_mut().zip(payload.chunks(4)) {
        let mut b = [0u8; 4];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u32::from_le_bytes(b);
    }
    Ok(words)
}

/// Copy the payload of `words` (`len` bytes, already checked) into `buf`.
fn payload(words: &[u32; MSG_WORDS], len: usize, buf: &mut [u8; MAX_PAYLOAD]) {
    for (chunk, w) in buf.chunks_mut(4).zip(&words[1..]) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    // Bytes past the length are the writer's padding: not part of the
    // message, so they are not handed on.
    buf[len..].fill(0);
}

/// Encode a message for `CtrlOut` (VR to host), addressed to `to`.
///
/// # Errors
/// [`PeerError::TooLong`] for a payload above [`MAX_PAYLOAD`];
/// [`PeerError::NoSuchPeer`] for `Instance(ALL)`, which would read as a
/// broadcast. (Whether the instance exists is checked by the SDK's `Peers::send`,
/// which knows the instance count.)
pub fn encode_to(to: PeerDest, payload: &[u8]) -> Result<[u32; MSG_WORDS], PeerError> {
    let peer = match to {
        PeerDest::Instance(ALL) => {
            return Err(PeerError::NoSuchPeer {
                peer: ALL,
                instances: MAX_INSTANCES,
            });
        }
        PeerDest::Instance(i) => i,
        PeerDest::All => ALL,
    };
    encode(peer, payload)
}

/// Decode a message read from `CtrlOut` (host side): its destination, with
/// its payload copied into `buf` and its length returned.
///
/// # Errors
/// [`WireError`] if the magic, the length or the destination (neither an
/// instance below `instances` nor [`ALL`]) is wrong; `buf` is then
/// unspecified.
pub fn decode_to(
    words: &[u32; MSG_WORDS],
    instances: u16,
    buf: &mut [u8; MAX_PAYLOAD],
) -> Result<(PeerDest, usize), WireError> {
    let (peer, len) = parse_header(words[0])?;
    let dest = match peer {
        ALL => PeerDest::All,
        i if i < instances => PeerDest::Instance(i),
        _ => return Err(WireError::BadPeer { peer, instances }),
    };
    payload(words, len, buf);
    Ok((dest, len))
}

/// Encode a message for `CtrlIn` (host to VR), from instance `from`.
///
/// # Errors
/// [`PeerError::TooLong`] for a payload above [`MAX_PAYLOAD`];
/// [`PeerError::NoSuchPeer`] for `from == ALL`.
pub fn encode_from(from: u16, payload: &[u8]) -> Result<[u32; MSG_WORDS], PeerError> {
    if from == ALL {
        return Err(PeerError::NoSuchPeer {
            peer: ALL,
            instances: MAX_INSTANCES,
        });
    }
    encode(from, payload)
}

/// Decode a message read from `CtrlIn` (VR side): its source instance, with
/// its payload copied into `buf` and its length returned.
///
/// # Errors
/// [`WireError`] if the magic, the length or the source (not an instance
/// below `instances`) is wrong; `buf` is then unspecified.
pub fn decode_from(
    words: &[u32; MSG_WORDS],
    instances: u16,
    buf: &mut [u8; MAX_PAYLOAD],
) -> Result<(u16, usize), WireError> {
    let (peer, len) = parse_header(words[0])?;
    if peer >= instances {
        return Err(WireError::BadPeer { peer, instances });
    }
    payload(words, len, buf);
    Ok((peer, len))
}

/// Pop and throw away every entry ready in `ring`, to get back in step
/// after a message that did not decode (both the host's relay and the VR's
/// the SDK's `Peers::recv` do). A message published meanwhile is kept whole: it
/// lies past the entries counted ready.
///
/// # Errors
/// The ring's error if its producer index is impossible.
pub fn discard_ready(ring: &mut Consumer) -> Result<(), RingError> {
    let mut scratch = [0u32; 64];
    let mut left = ring.ready()? as usize;
    while left > 0 {
        let n = ring.pop(&mut scratch[..left.min(64)])?;
        if n == 0 {
            break;
        }
        left -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn payload_of(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(37) ^ 0x5a).collect()
    }

    #[test]
    fn header_bytes_are_as_documented() {
        let w = encode_to(PeerDest::Instance(3), b"hello").unwrap();
        assert_eq!(w[0], 0x0003_05A7);
        assert_eq!(w[1], u32::from_le_bytes(*b"hell"));
        assert_eq!(w[2], u32::from(b'o'));
        assert!(w[3..].iter().all(|&x| x == 0));
        let w = encode_to(PeerDest::All, &[]).unwrap();
        assert_eq!(w[0], 0xFFFF_00A7);
        let w = encode_from(7, &[1; 60]).unwrap();
        assert_eq!(w[0], 0x0007_3CA7);
    }

    #[test]
    fn every_length_round_trips() {
        let mut buf = [0xEEu8; MAX_PAYLOAD];
        for n in 0..=MAX_PAYLOAD {
            let p = payload_of(n);
            let w = encode_to(PeerDest::Instance(1), &p).unwrap();
            assert_eq!(
                decode_to(&w, 2, &mut buf).unwrap(),
                (PeerDest::Instance(1), n)
            );
            assert_eq!(&buf[..n], &p[..]);
            assert!(buf[n..].iter().all(|&b| b == 0), "padding not handed on");
            let w = encode_from(0, &p).unwrap();
            assert_eq!(decode_from(&w, 2, &mut buf).unwrap(), (0, n));
            assert_eq!(&buf[..n], &p[..]);
        }
    }

    #[test]
    fn bad_messages_are_refused() {
        let mut buf = [0u8; MAX_PAYLOAD];
        assert_eq!(
            encode_to(PeerDest::All, &[0; 61]),
            Err(PeerError::TooLong { len: 61 })
        );
        assert!(encode_to(PeerDest::Instance(ALL), b"x").is_err());
        assert!(encode_from(ALL, b"x").is_err());
        let good = encode_to(PeerDest::Instance(1), b"x").unwrap();

        let mut w = good;
        w[0] ^= 1;
        assert_eq!(
            decode_to(&w, 2, &mut buf),
            Err(WireError::BadMagic { found: 0xA6 })
        );
        assert!(decode_from(&w, 2, &mut buf).is_err());

        let mut w = good;
        w[0] = header(1, 0) | 61 << 8;
        assert_eq!(
            decode_to(&w, 2, &mut buf),
            Err(WireError::TooLong { len: 61 })
        );
        w[0] = header(1, 0) | 255 << 8;
        assert_eq!(
            decode_from(&w, 2, &mut buf),
            Err(WireError::TooLong { len: 255 })
        );

        // Instance 1 of a VR of one; ALL is a destination, never a source.
        assert_eq!(
            decode_to(&good, 1, &mut buf),
            Err(WireError::BadPeer {
                peer: 1,
                instances: 1
            })
        );
        let all = encode_to(PeerDest::All, b"x").unwrap();
        assert!(decode_to(&all, 1, &mut buf).is_ok());
        assert_eq!(
            decode_from(&all, 64, &mut buf),
            Err(WireError::BadPeer {
                peer: ALL,
                instances: 64
            })
        );
    }

    proptest! {
        #[test]
        fn round_trip(peer in 0u16..64, all in any::<bool>(), p in proptest::collection::vec(any::<u8>(), 0..=MAX_PAYLOAD)) {
            let mut buf = [0u8; MAX_PAYLOAD];
            let to = if all { PeerDest::All } else { PeerDest::Instance(peer) };
            let w = encode_to(to, &p).unwrap();
            prop_assert_eq!(decode_to(&w, 64, &mut buf).unwrap(), (to, p.len()));
            prop_assert_eq!(&buf[..p.len()], &p[..]);
            let w = encode_from(peer, &p).unwrap();
            prop_assert_eq!(decode_from(&w, peer + 1, &mut buf).unwrap(), (peer, p.len()));
            prop_assert_eq!(&buf[..p.len()], &p[..]);
        }

        /// Any 16 words: an error, or a message within bounds that
        /// encodes back to the same words but for padding.
        #[test]
        fn any_words_decode_safely(words in proptest::array::uniform16(any::<u32>()), instances in 1u16..=64) {
            let mut buf = [0u8; MAX_PAYLOAD];
            if let Ok((dest, len)) = decode_to(&words, instances, &mut buf) {
                prop_assert!(len <= MAX_PAYLOAD);
                if let PeerDest::Instance(i) = dest { prop_assert!(i < instances); }
                let again = encode_to(dest, &buf[..len]).unwrap();
                prop_assert_eq!(again[0], words[0]);
            }
            if let Ok((from, len)) = decode_from(&words, instances, &mut buf) {
                prop_assert!(from < instances && len <= MAX_PAYLOAD);
                prop_assert_eq!(encode_from(from, &buf[..len]).unwrap()[0], words[0]);
            }
        }
    }
}
