//! The reference expositions parse as expected, and the writer reproduces vLLM's byte for byte.

// A panic in a test is a failed assertion.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use inferscale_promtext::{FloatStyle, Format, MetricType, WriteOptions, histograms, parse, write};

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(testdata(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn vllm_exposition_parses_completely() {
    let text = read("vllm/metrics_single_engine.prom");
    let exp = parse(&text).unwrap();
    assert_eq!(exp.format(), Format::PrometheusText);
    let lines = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && l[0] != b'#')
        .count();
    assert_eq!(
        exp.sample_count(),
        lines,
        "every sample line becomes a sample"
    );
    let by_type = |t| exp.families().filter(|f| f.kind() == t).count();
    assert_eq!(by_type(MetricType::Counter), 22);
    assert_eq!(by_type(MetricType::Gauge), 50);
    assert_eq!(by_type(MetricType::Histogram), 18);
    assert_eq!(by_type(MetricType::Summary), 2);
    let e2e = histograms(&exp, "vllm:e2e_request_latency_seconds");
    assert_eq!(e2e.len(), 1);
    assert_eq!(e2e[0].label("model_name"), Some("Qwen/Qwen3-0.6B"));
    assert_eq!(e2e[0].histogram.buckets.len(), 22);
    assert_eq!(e2e[0].histogram.count, 2.0);
}

#[test]
fn writer_reproduces_the_vllm_exposition_byte_for_byte() {
    let text = read("vllm/metrics_single_engine.prom");
    let exp = parse(&text).unwrap();
    let written = write(
        &exp,
        WriteOptions {
            format: Format::PrometheusText,
            float_style: FloatStyle::Python,
        },
    );
    let original = String::from_utf8(text).unwrap();
    for (i, (a, b)) in original.lines().zip(written.lines()).enumerate() {
        assert_eq!(a, b, "line {}", i + 1);
    }
    assert_eq!(original, written);
}

#[test]
fn dcgm_samples_parse() {
    for file in [
        "dcgm/dcgm-exporter_README_k8s_sample.txt",
        "dcgm/dcgm-exporter_README_quickstart_sample.txt",
    ] {
        // The README excerpts elide with "..." lines; everything else is exporter output.
        let text = String::from_utf8(read(file)).unwrap();
        let text: String = text
            .lines()
            .filter(|l| l.trim() != "...")
            .map(|l| format!("{l}\n"))
            .collect();
        let exp = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{file}: {e}"));
        let clock = exp
            .samples_named("DCGM_FI_DEV_SM_CLOCK")
            .next()
            .unwrap_or_else(|| panic!("{file}: no SM clock"));
        assert_eq!(clock.value(), 139.0);
        // The README puts a space after a comma; the labels still come out right.
        assert_eq!(clock.label("gpu"), Some("0"));
        assert_eq!(
            clock.label("UUID"),
            Some("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52")
        );
        // The DCGM blank sentinel survives as a (huge) number for the catalog to reject.
        let temp = exp.samples_named("DCGM_FI_DEV_MEMORY_TEMP").next().unwrap();
        assert_eq!(temp.value(), 9223372036854775794.0);
    }
}
