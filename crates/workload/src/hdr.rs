//! HdrHistogram's V2 encoding, so a step's histograms can travel in `run.json` and be added
//! exactly on another machine (`inferscale merge`).
//!
//! The layout is HdrHistogram's own, so other implementations read what this writes (checked
//! against the `hdrhistogram` crate's own serializer and deserializer, both ways:
//! `bench/hdr-codec`). A 40-byte big-endian header comes first: cookie `0x1c849313` (the V2
//! base `0x1c849303` with the 8-byte word-size flag `0x10`, as the Java original and the
//! Rust crate write it; the bare base, which inferscale wrote before 2026-12-06, is still
//! read), payload length, normalising
//! index offset, significant digits, lowest and highest trackable values, and the
//! integer-to-double ratio. The payload follows: the counts by bucket index, each
//! ZigZag-encoded in LEB128 (at most 9 bytes, the ninth carrying 8 bits), with a run of `z`
//! empty buckets written as `−z`. In JSON it is base64 (standard alphabet, padded). The
//! compressed form (cookie `…14`, zlib) is not written. It is refused when read.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;

/// The V2 cookie (uncompressed): the base with the word-size flag, as HdrHistogram writes it.
const COOKIE_V2: u32 = 0x1c84_9313;
/// The bare V2 base, which inferscale wrote before it was checked against the crate.
const COOKIE_V2_BARE: u32 = 0x1c84_9303;
/// The V2 cookies of the zlib-compressed form.
const COOKIE_V2_COMPRESSED: u32 = 0x1c84_9314;
const COOKIE_V2_COMPRESSED_BARE: u32 = 0x1c84_9304;
const HEADER: usize = 40;

/// Why an encoded histogram could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HdrError {
    /// Not base64.
    #[error("not base64: {0}")]
    Base64(String),
    /// Too short for its header or its stated payload.
    #[error("truncated: {0}")]
    Truncated(String),
    /// Another cookie.
    #[error("cookie {0:#010x} is not HdrHistogram V2 (0x1c849313)")]
    Cookie(u32),
    /// The compressed form.
    #[error("the compressed V2 form (cookie 0x1c849314) is not read; write it uncompressed")]
    Compressed,
    /// Header fields no histogram can have.
    #[error("bad header: {0}")]
    Header(String),
    /// A count past the histogram's range, or a malformed varint.
    #[error("bad payload: {0}")]
    Payload(String),
}

/// Encodes `h` (V2, uncompressed) as base64.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut payload = Vec::new();
    let mut zeros: i64 = 0;
    for v in h.iter_all() {
        let c = v.count_since_last_iteration();
        if c == 0 {
            zeros += 1;
            continue;
        }
        if zeros > 0 {
            put_varint(&mut payload, zigzag(-zeros));
            zeros = 0;
        }
        put_varint(&mut payload, zigzag(i64::try_from(c).unwrap_or(i64::MAX)));
    }
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&COOKIE_V2.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&u32::from(h.sigfig()).to_be_bytes());
    out.extend_from_slice(&h.low().to_be_bytes());
    out.extend_from_slice(&h.high().to_be_bytes());
    out.extend_from_slice(&1.0f64.to_be_bytes());
    out.extend_from_slice(&payload);
    base64_encode(&out)
}

/// Reads what [`encode`] (or another HdrHistogram's uncompressed V2 encoder) wrote. The
/// histogram resizes itself as it is added to.
pub fn decode(text: &str) -> Result<Histogram<u64>, HdrError> {
    let bytes = base64_decode(text.trim())?;
    if bytes.len() < HEADER {
        return Err(HdrError::Truncated(format!(
            "{} bytes, the header alone is {HEADER}",
            bytes.len()
        )));
    }
    let u32_at = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    match u32_at(0) {
        COOKIE_V2 | COOKIE_V2_BARE => {}
        COOKIE_V2_COMPRESSED | COOKIE_V2_COMPRESSED_BARE => return Err(HdrError::Compressed),
        c => return Err(HdrError::Cookie(c)),
    }
    let len = u32_at(4) as usize;
    if bytes.len() < HEADER + len {
        return Err(HdrError::Truncated(format!(
            "the header states {len} payload bytes, {} follow",
            bytes.len() - HEADER
        )));
    }
    if u32_at(8) != 0 {
        return Err(HdrError::Header(format!(
            "normalising index offset {} (only 0 is read)",
            u32_at(8) as i32
        )));
    }
    let sigfig = u32_at(12);
    let (low, high) = (u64_at(16), u64_at(24));
    if !(1..=5).contains(&sigfig) || low < 1 || high < 2 * low {
        return Err(HdrError::Header(format!(
            "significant digits {sigfig}, lowest {low}, highest {high}"
        )));
    }
    let mut h = Histogram::<u64>::new_with_bounds(low, high, sigfig as u8)
        .map_err(|e| HdrError::Header(format!("{e:?}")))?;
    h.auto(true);
    let layout = Layout::new(low, sigfig);
    let mut payload = &bytes[HEADER..HEADER + len];
    let mut index: u64 = 0;
    while !payload.is_empty() {
        let v = unzigzag(take_varint(&mut payload)?);
        if v < 0 {
            index = index.saturating_add(v.unsigned_abs());
            continue;
        }
        let value = layout
            .value_at(index)
            .ok_or_else(|| HdrError::Payload(format!("bucket index {index} is out of range")))?;
        h.record_n(value, v as u64)
            .map_err(|e| HdrError::Payload(format!("bucket index {index}: {e:?}")))?;
        index += 1;
    }
    Ok(h)
}

/// The bucket layout of a histogram, for the value a count index stands for.
struct Layout {
    unit_magnitude: u32,
    sub_bucket_half_count_magnitude: u32,
    sub_bucket_half_count: u64,
}

impl Layout {
    fn new(low: u64, sigfig: u32) -> Layout {
        let largest_single_unit = 2 * 10u64.pow(sigfig);
        let sub_bucket_count_magnitude = 64 - (largest_single_unit - 1).leading_zeros();
        let sub_bucket_half_count_magnitude = sub_bucket_count_magnitude.max(1) - 1;
        Layout {
            unit_magnitude: 63 - low.leading_zeros(),
            sub_bucket_half_count_magnitude,
            sub_bucket_half_count: 1 << sub_bucket_half_count_magnitude,
        }
    }

    /// The lowest value of the bucket at `index`.
    fn value_at(&self, index: u64) -> Option<u64> {
        let mut bucket = (index >> self.sub_bucket_half_count_magnitude) as i64 - 1;
        let mut sub = (index & (self.sub_bucket_half_count - 1)) + self.sub_bucket_half_count;
        if bucket < 0 {
            sub -= self.sub_bucket_half_count;
            bucket = 0;
        }
        let shift = u32::try_from(bucket).ok()? + self.unit_magnitude;
        (shift < 64 && sub.leading_zeros() > shift).then(|| sub << shift)
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// HdrHistogram's LEB128: 7 bits a byte for eight bytes, then a ninth of 8 bits.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    for _ in 0..8 {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(input: &mut &[u8]) -> Result<u64, HdrError> {
    let mut v: u64 = 0;
    for i in 0..9 {
        let (&b, rest) = input
            .split_first()
            .ok_or_else(|| HdrError::Payload("a count is cut short".into()))?;
        *input = rest;
        if i == 8 {
            return Ok(v | (u64::from(b) << 56));
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    unreachable!("the ninth byte returns")
}

/// Base64, standard alphabet, padded (the `base64` crate, as strict as HdrHistogram's
/// writers are: no missing padding, no stray characters).
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

pub(crate) fn base64_decode(text: &str) -> Result<Vec<u8>, HdrError> {
    STANDARD
        .decode(text)
        .map_err(|e| HdrError::Base64(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
        h.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }

    #[test]
    fn a_histogram_comes_back_as_it_went() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [1u64, 2, 3, 1000, 1001, 2047, 2048, 123_456, 9_876_543_210] {
            h.record_n(v, v % 7 + 1).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(pairs(&back), pairs(&h));
        assert_eq!(back.len(), h.len());
        assert_eq!(back.max(), h.max());
        let empty = Histogram::<u64>::new(3).unwrap();
        assert_eq!(decode(&encode(&empty)).unwrap().len(), 0);
    }

    #[test]
    fn varints_and_zigzag_cover_the_range() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            1 << 40,
            -(1 << 55),
            i64::MAX,
            i64::MIN,
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, zigzag(v));
            assert!(buf.len() <= 9);
            let mut s = buf.as_slice();
            assert_eq!(unzigzag(take_varint(&mut s).unwrap()), v);
            assert!(s.is_empty());
        }
    }

    #[test]
    fn base64_round_trips_and_refuses_garbage() {
        for n in 0..10 {
            let b: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(base64_decode(&base64_encode(&b)).unwrap(), b);
        }
        assert_eq!(base64_encode(b"Man"), "TWFu");
        assert_eq!(base64_encode(b"Ma"), "TWE=");
        assert!(base64_decode("TWF").is_err());
        assert!(base64_decode("TW=u").is_err());
        assert!(base64_decode("TW*u").is_err());
    }

    #[test]
    fn bad_encodings_say_what_is_wrong() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        h.record(42).unwrap();
        let good = base64_decode(&encode(&h)).unwrap();
        let cut = base64_encode(&good[..good.len() - 1]);
        assert!(matches!(decode(&cut), Err(HdrError::Truncated(_))));
        let mut compressed = good.clone();
        compressed[..4].copy_from_slice(&COOKIE_V2_COMPRESSED.to_be_bytes());
        assert_eq!(
            decode(&base64_encode(&compressed)),
            Err(HdrError::Compressed)
        );
        // What inferscale wrote before (the bare base cookie) is still read.
        let mut bare = good.clone();
        bare[..4].copy_from_slice(&COOKIE_V2_BARE.to_be_bytes());
        assert_eq!(decode(&base64_encode(&bare)).unwrap().len(), 1);
        let mut other = good;
        other[3] ^= 0xff;
        assert!(matches!(
            decode(&base64_encode(&other)),
            Err(HdrError::Cookie(_))
        ));
    }
}
