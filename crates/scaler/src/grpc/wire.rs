//! Protobuf's binary encoding, the part the generated messages use: varints, fixed 64- and
//! 32-bit values, length-delimited fields; unknown fields are skipped, as protobuf requires
//! (a newer KEDA may send fields this scaler does not know).

use std::collections::BTreeMap;

use super::Message;

/// A field's wire type (the low three bits of its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    /// int32, int64, uint32, uint64, bool, enum.
    Varint,
    /// double, fixed64.
    Fixed64,
    /// string, bytes, messages, packed repeated scalars.
    Len,
    /// float, fixed32.
    Fixed32,
}

/// Why bytes are not a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes end inside a value.
    #[error("the message ends inside a field")]
    Truncated,
    /// A varint longer than ten bytes.
    #[error("a varint longer than 10 bytes")]
    LongVarint,
    /// Wire types 3 and 4 (groups) or 6 and 7.
    #[error("wire type {0} is not supported")]
    WireType(u64),
    /// A known field sent with another wire type.
    #[error("field {field}: wire type {got:?}, expected {want:?}")]
    Mismatch {
        /// The field number.
        field: u32,
        /// What came.
        got: WireType,
        /// What the field's type is encoded as.
        want: WireType,
    },
    /// Field number 0 or past 2^29 − 1.
    #[error("field number {0} is out of range")]
    FieldNumber(u64),
    /// A string field that is not UTF-8.
    #[error("field {0}: a string that is not UTF-8")]
    Utf8(u32),
}

/// Reads one message's bytes.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    field: u32,
}

impl<'a> Reader<'a> {
    /// Reads `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, field: 0 }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first().ok_or(DecodeError::Truncated)?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError::LongVarint)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field's number and wire type.
    pub fn key(&mut self) -> Result<(u32, WireType), DecodeError> {
        let k = self.varint()?;
        let wire = match k & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            5 => WireType::Fixed32,
            t => return Err(DecodeError::WireType(t)),
        };
        let n = k >> 3;
        if n == 0 || n > 536_870_911 {
            return Err(DecodeError::FieldNumber(n));
        }
        self.field = n as u32;
        Ok((self.field, wire))
    }

    fn want(&self, got: WireType, want: WireType) -> Result<(), DecodeError> {
        if got == want {
            Ok(())
        } else {
            Err(DecodeError::Mismatch {
                field: self.field,
                got,
                want,
            })
        }
    }

    /// Skips a field this message does not know.
    pub fn skip(&mut self, wire: WireType) -> Result<(), DecodeError> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::Fixed64 => self.take(8).map(drop),
            WireType::Fixed32 => self.take(4).map(drop),
            WireType::Len => self.bytes(wire).map(drop),
        }
    }

    /// A length-delimited field's bytes.
    pub fn bytes(&mut self, wire: WireType) -> Result<&'a [u8], DecodeError> {
        self.want(wire, WireType::Len)?;
        let n = self.varint()?;
        self.take(usize::try_from(n).map_err(|_| DecodeError::Truncated)?)
    }

    /// A `string` field.
    pub fn string(&mut self, wire: WireType) -> Result<String, DecodeError> {
        let field = self.field;
        let b = self.bytes(wire)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::Utf8(field))
    }

    /// A `bool` field (any non-zero varint is true).
    pub fn bool(&mut self, wire: WireType) -> Result<bool, DecodeError> {
        self.want(wire, WireType::Varint)?;
        Ok(self.varint()? != 0)
    }

    /// An `int64` field.
    pub fn int64(&mut self, wire: WireType) -> Result<i64, DecodeError> {
        self.want(wire, WireType::Varint)?;
        Ok(self.varint()? as i64)
    }

    /// An `int32` field (sent sign-extended to 64 bits; truncated back, as protobuf does).
    pub fn int32(&mut self, wire: WireType) -> Result<i32, DecodeError> {
        self.want(wire, WireType::Varint)?;
        Ok(self.varint()? as i32)
    }

    /// A `uint64` field.
    pub fn uint64(&mut self, wire: WireType) -> Result<u64, DecodeError> {
        self.want(wire, WireType::Varint)?;
        self.varint()
    }

    /// A `uint32` field.
    pub fn uint32(&mut self, wire: WireType) -> Result<u32, DecodeError> {
        self.want(wire, WireType::Varint)?;
        Ok(self.varint()? as u32)
    }

    /// A `double` field.
    pub fn double(&mut self, wire: WireType) -> Result<f64, DecodeError> {
        self.want(wire, WireType::Fixed64)?;
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_le_bytes(a))
    }

    /// A `float` field.
    pub fn float(&mut self, wire: WireType) -> Result<f32, DecodeError> {
        self.want(wire, WireType::Fixed32)?;
        let b = self.take(4)?;
        let mut a = [0u8; 4];
        a.copy_from_slice(b);
        Ok(f32::from_le_bytes(a))
    }

    /// One entry of a `map<string, string>` (a message with key = 1, value = 2; either may
    /// be missing, meaning empty).
    pub fn string_entry(&mut self, wire: WireType) -> Result<(String, String), DecodeError> {
        let mut r = Reader::new(self.bytes(wire)?);
        let (mut k, mut v) = (String::new(), String::new());
        while !r.is_empty() {
            match r.key()? {
                (1, w) => k = r.string(w)?,
                (2, w) => v = r.string(w)?,
                (_, w) => r.skip(w)?,
            }
        }
        Ok((k, v))
    }

    /// The bytes `bytes` field.
    #[allow(clippy::wrong_self_convention)]
    pub fn to_vec(&mut self, wire: WireType) -> Result<Vec<u8>, DecodeError> {
        self.bytes(wire).map(<[u8]>::to_vec)
    }
}

/// Writes one message's bytes. Proto3 leaves fields at their default value out.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, n: u32, wire: u64) {
        self.varint((u64::from(n) << 3) | wire);
    }

    fn len_field(&mut self, n: u32, b: &[u8]) {
        self.key(n, 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    /// A `string` field.
    pub fn string(&mut self, n: u32, v: &str) {
        if !v.is_empty() {
            self.len_field(n, v.as_bytes());
        }
    }

    /// A `bytes` field.
    pub fn bytes(&mut self, n: u32, v: &[u8]) {
        if !v.is_empty() {
            self.len_field(n, v);
        }
    }

    /// A `bool` field.
    pub fn bool(&mut self, n: u32, v: &bool) {
        if *v {
            self.key(n, 0);
            self.varint(1);
        }
    }

    /// An `int64` field.
    pub fn int64(&mut self, n: u32, v: &i64) {
        if *v != 0 {
            self.key(n, 0);
            self.varint(*v as u64);
        }
    }

    /// An `int32` field (negative values sign-extended to ten bytes, as protobuf does).
    pub fn int32(&mut self, n: u32, v: &i32) {
        self.int64(n, &i64::from(*v));
    }

    /// A `uint64` field.
    pub fn uint64(&mut self, n: u32, v: &u64) {
        if *v != 0 {
            self.key(n, 0);
            self.varint(*v);
        }
    }

    /// A `uint32` field.
    pub fn uint32(&mut self, n: u32, v: &u32) {
        self.uint64(n, &u64::from(*v));
    }

    /// A `double` field (-0.0 is not the default and is written).
    pub fn double(&mut self, n: u32, v: &f64) {
        if v.to_bits() != 0 {
            self.key(n, 1);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A `float` field.
    pub fn float(&mut self, n: u32, v: &f32) {
        if v.to_bits() != 0 {
            self.key(n, 5);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A message field (written even when empty: its presence is information).
    pub fn message<M: Message>(&mut self, n: u32, m: &M) {
        let mut inner = Writer::default();
        m.encode(&mut inner);
        self.len_field(n, &inner.buf);
    }

    /// A `map<string, string>` field, one entry message per key, in key order.
    pub fn string_map(&mut self, n: u32, m: &BTreeMap<String, String>) {
        for (k, v) in m {
            let mut e = Writer::default();
            e.string(1, k);
            e.string(2, v);
            self.len_field(n, &e.buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_their_byte_boundaries() {
        for v in [
            0u64,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut w = Writer::default();
            w.varint(v);
            let b = w.into_bytes();
            assert_eq!(Reader::new(&b).varint(), Ok(v), "{v}");
        }
        // Eleven continuation bytes are not a varint.
        assert_eq!(
            Reader::new(&[0xff; 11]).varint(),
            Err(DecodeError::LongVarint)
        );
        assert_eq!(Reader::new(&[0x80]).varint(), Err(DecodeError::Truncated));
    }

    #[test]
    fn negative_int64_takes_ten_bytes_and_comes_back() {
        let mut w = Writer::default();
        w.int64(2, &-1);
        let b = w.into_bytes();
        assert_eq!(b.len(), 11);
        let mut r = Reader::new(&b);
        let (n, wire) = r.key().unwrap_or((0, WireType::Fixed32));
        assert_eq!((n, r.int64(wire)), (2, Ok(-1)));
    }

    #[test]
    fn a_known_field_with_the_wrong_wire_type_is_named() {
        // Field 1 as a varint where a string is expected.
        let mut r = Reader::new(&[0x08, 0x01]);
        let (_, wire) = r.key().unwrap_or((0, WireType::Fixed32));
        assert_eq!(
            r.string(wire),
            Err(DecodeError::Mismatch {
                field: 1,
                got: WireType::Varint,
                want: WireType::Len
            })
        );
    }

    #[test]
    fn groups_and_field_zero_are_refused() {
        assert_eq!(Reader::new(&[0x0b]).key(), Err(DecodeError::WireType(3)));
        assert_eq!(Reader::new(&[0x00]).key(), Err(DecodeError::FieldNumber(0)));
    }
}
