//! Fuzzes the exposition parser: no input may panic it, and whatever it accepts must survive a
//! write and a second parse unchanged.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run parse` (cargo-fuzz needs nightly flags; the
//! bootstrap variable lets the stable toolchain take them).

#![no_main]

use inferscale_promtext::{
    FloatStyle, Format, ParseOptions, WriteOptions, parse, parse_with, validate_openmetrics, write,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let strict = validate_openmetrics(data);
    let lenient = parse(data);
    if let Ok(s) = &strict {
        // Strict acceptance implies lenient acceptance of the same samples.
        let l = parse_with(
            data,
            ParseOptions {
                format: Some(Format::OpenMetrics),
                strict: false,
            },
        )
        .expect("lenient parse accepts what strict accepts");
        assert_eq!(s.sample_count(), l.sample_count());
    }
    if let Ok(exp) = lenient {
        // OpenMetrics can express everything the model holds (exemplars included).
        let text = write(
            &exp,
            WriteOptions {
                format: Format::OpenMetrics,
                float_style: FloatStyle::Go,
            },
        );
        let again = parse_with(
            text.as_bytes(),
            ParseOptions {
                format: Some(Format::OpenMetrics),
                strict: false,
            },
        )
        .unwrap_or_else(|e| panic!("written text does not parse: {e}\n{text}"));
        assert!(again == exp, "round trip changed the exposition:\n{text}");
        // Reading signals (histogram extraction, quantiles, merging) must not panic either.
        let snap = inferscale_catalog::Snapshot::read(&exp, "fuzz");
        let _ = snap.signals();
    }
});
