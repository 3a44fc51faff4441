//! The 8-byte header ICMP (RFC 792) and ICMPv6 (RFC 4443) share: type,
//! code, checksum and 4 bytes whose meaning depends on the type. Both
//! views get the accessors of that header from [`icmp_header_view`]; each
//! keeps what differs (the checksum's coverage, the type registry, the
//! meaning of the last 4 bytes).

/// Offsets of the shared header's fields.
pub(crate) mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQ: Range<usize> = 6..8;
}

/// Length of the header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;

/// Define the view `$name` of a message with the shared header: the
/// struct, its constructors and the header's accessors. `is_error` (a
/// `const fn(u8) -> bool`) must be in scope where it is used.
macro_rules! icmp_header_view {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wrap a buffer without checks; accessors may panic on a short one.
            #[inline]
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wrap a buffer after [`check_len`](Self::check_len).
            ///
            /// # Errors
            /// As [`check_len`](Self::check_len).
            #[inline]
            pub fn new_checked(buffer: T) -> Result<Self, $crate::ParseError> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// Check the 8-byte header is in the buffer.
            ///
            /// # Errors
            /// [`ParseError::Truncated`]($crate::ParseError::Truncated) if it is not.
            #[inline]
            pub fn check_len(&self) -> Result<(), $crate::ParseError> {
                if self.buffer.as_ref().len() < $crate::icmp_header::HEADER_LEN {
                    return Err($crate::ParseError::Truncated);
                }
                Ok(())
            }

            /// The wrapped buffer.
            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// Message type (see [`msg`]).
            #[inline]
            pub fn msg_type(&self) -> u8 {
                self.buffer.as_ref()[$crate::icmp_header::field::TYPE]
            }

            /// Code.
            #[inline]
            pub fn code(&self) -> u8 {
                self.buffer.as_ref()[$crate::icmp_header::field::CODE]
            }

            /// Checksum field.
            #[inline]
            pub fn checksum(&self) -> u16 {
                $crate::bytes::read_u16(self.buffer.as_ref(), $crate::icmp_header::field::CHECKSUM)
            }

            /// The 4 bytes after the checksum, big-endian: an echo's
            /// identifier and sequence; in an error, unused or a
            /// type-specific value (MTU, pointer).
            #[inline]
            pub fn rest_of_header(&self) -> u32 {
                $crate::bytes::read_u32(self.buffer.as_ref(), $crate::icmp_header::field::REST)
            }

            /// Identifier of an echo request or reply.
            #[inline]
            pub fn echo_ident(&self) -> u16 {
                $crate::bytes::read_u16(self.buffer.as_ref(), $crate::icmp_header::field::ECHO_IDENT)
            }

            /// Sequence number of an echo request or reply.
            #[inline]
            pub fn echo_seq(&self) -> u16 {
                $crate::bytes::read_u16(self.buffer.as_ref(), $crate::icmp_header::field::ECHO_SEQ)
            }

            /// Everything after the header: an echo's data, or an error's
            /// quoted packet.
            #[inline]
            pub fn data(&self) -> &[u8] {
                &self.buffer.as_ref()[$crate::icmp_header::HEADER_LEN..]
            }

            /// Whether this message is an error (see [`is_error`]).
            #[inline]
            pub fn is_error(&self) -> bool {
                is_error(self.msg_type())
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Set the message type.
            #[inline]
            pub fn set_msg_type(&mut self, t: u8) {
                self.buffer.as_mut()[$crate::icmp_header::field::TYPE] = t;
            }

            /// Set the code.
            #[inline]
            pub fn set_code(&mut self, c: u8) {
                self.buffer.as_mut()[$crate::icmp_header::field::CODE] = c;
            }

            /// Set the checksum field.
            #[inline]
            pub fn set_checksum(&mut self, c: u16) {
                $crate::bytes::write_u16(self.buffer.as_mut(), $crate::icmp_header::field::CHECKSUM, c);
            }

            /// Set the 4 bytes after the checksum.
            #[inline]
            pub fn set_rest_of_header(&mut self, v: u32) {
                $crate::bytes::write_u32(self.buffer.as_mut(), $crate::icmp_header::field::REST, v);
            }

            /// Set the echo identifier.
            #[inline]
            pub fn set_echo_ident(&mut self, v: u16) {
                $crate::bytes::write_u16(self.buffer.as_mut(), $crate::icmp_header::field::ECHO_IDENT, v);
            }

            /// Set the echo sequence number.
            #[inline]
            pub fn set_echo_seq(&mut self, v: u16) {
                $crate::bytes::write_u16(self.buffer.as_mut(), $crate::icmp_header::field::ECHO_SEQ, v);
            }

            /// Change type and code, updating the checksum incrementally
            /// (RFC 1624): an echo request becomes a reply without summing
            /// its data again (for ICMPv6, swapping source and destination
            /// leaves the pseudo-header's sum as it was).
            #[inline]
            pub fn set_type_code_update_checksum(&mut self, t: u8, code: u8) {
                let b = self.buffer.as_ref();
                let old = u16::from_be_bytes([
                    b[$crate::icmp_header::field::TYPE],
                    b[$crate::icmp_header::field::CODE],
                ]);
                let new = u16::from_be_bytes([t, code]);
                let c = $crate::checksum::update16(self.checksum(), old, new);
                self.set_msg_type(t);
                self.set_code(code);
                self.set_checksum(c);
            }

            /// The data after the header, mutable.
            #[inline]
            pub fn data_mut(&mut self) -> &mut [u8] {
                &mut self.buffer.as_mut()[$crate::icmp_header::HEADER_LEN..]
            }
        }
    };
}

pub(crate) use icmp_header_view;
