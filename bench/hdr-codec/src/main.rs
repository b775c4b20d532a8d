// A one-off judgement (its own workspace, not built by CI): hdrhistogram's V2 serializer
// against inferscale's own V2 codec (crates/workload/src/hdr.rs), on a latency histogram
// of the shape a load step records. Both directions are read back and compared bucket by
// bucket, and each side is timed.
use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use inferscale_workload::hdr;

fn pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
}

fn main() {
    // 6,000 requests' end-to-end latencies in microseconds: a log-normal-ish spread from
    // 40 ms to 40 s, from a fixed linear-congruential sequence (no rand dependency).
    let mut h = Histogram::<u64>::new(3).unwrap();
    let mut x: u64 = 12345;
    for _ in 0..6000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        h.record((40_000.0 * (1000f64).powf(u * u)) as u64).unwrap();
    }
    let ours = hdr::encode(&h);
    let mut theirs_bytes = Vec::new();
    V2Serializer::new().serialize(&h, &mut theirs_bytes).unwrap();
    let theirs = STANDARD.encode(&theirs_bytes);
    let mut deflated = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut deflated).unwrap();

    // Ours read by theirs, theirs read by ours.
    let ours_bytes = STANDARD.decode(&ours).unwrap();
    let by_them: Histogram<u64> = Deserializer::new().deserialize(&mut ours_bytes.as_slice()).unwrap();
    let by_us = hdr::decode(&theirs).unwrap();
    println!("buckets recorded: {}", pairs(&h).len());
    println!("ours -> hdrhistogram: identical = {}", pairs(&by_them) == pairs(&h));
    println!("hdrhistogram -> ours: identical = {}", pairs(&by_us) == pairs(&h));
    println!("bytes: ours {} (base64 {}), hdrhistogram V2 {}, V2+deflate {}; payload bytes identical = {}",
        ours_bytes.len(), ours.len(), theirs_bytes.len(), deflated.len(), ours_bytes[8..] == theirs_bytes[8..]);
    let diff: Vec<usize> = (0..ours_bytes.len().min(theirs_bytes.len())).filter(|&i| ours_bytes[i] != theirs_bytes[i]).collect();
    println!("differing byte offsets: {:?} (header: ours {:02x?}, theirs {:02x?})", &diff[..diff.len().min(8)], &ours_bytes[..40], &theirs_bytes[..40]);
    println!("ours reading the deflated form: {:?}", hdr::decode(&STANDARD.encode(&deflated)).err());

    for round in 0..3 {
        let n = 20_000u32;
        let t = Instant::now();
        for _ in 0..n { std::hint::black_box(hdr::encode(std::hint::black_box(&h))); }
        let enc_ours = t.elapsed() / n;
        let t = Instant::now();
        for _ in 0..n {
            let mut b = Vec::new();
            V2Serializer::new().serialize(std::hint::black_box(&h), &mut b).unwrap();
            std::hint::black_box(STANDARD.encode(&b));
        }
        let enc_theirs = t.elapsed() / n;
        let t = Instant::now();
        for _ in 0..n { std::hint::black_box(hdr::decode(std::hint::black_box(&ours)).unwrap()); }
        let dec_ours = t.elapsed() / n;
        let t = Instant::now();
        for _ in 0..n {
            let b = STANDARD.decode(std::hint::black_box(&theirs)).unwrap();
            let r: Histogram<u64> = Deserializer::new().deserialize(&mut b.as_slice()).unwrap();
            std::hint::black_box(r);
        }
        let dec_theirs = t.elapsed() / n;
        println!("round {round}: encode ours {enc_ours:?}, hdrhistogram {enc_theirs:?}; decode ours {dec_ours:?}, hdrhistogram {dec_theirs:?}");
    }
}
