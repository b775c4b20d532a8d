//! Property: whatever the writer prints, the parser reads back to the same exposition.

// A panic in a test is a failed assertion.
#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use inferscale_promtext::{
    Exemplar, Exposition, FloatStyle, Format, Label, MetricType, ParseOptions, WriteOptions,
    parse_with, write,
};
use proptest::prelude::*;

/// Text that survives a line-based format: anything but carriage returns (a trailing one is
/// stripped as a Windows line ending) and, at the start of HELP, blanks (they separate tokens).
fn free_text() -> impl Strategy<Value = String> {
    "[^\r]{0,12}".prop_map(|s| s.trim_start_matches([' ', '\t']).to_owned())
}

fn label_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z_][a-zA-Z0-9_]{0,6}",
        1 => "[a-z]{1,3}[.\\-é/][a-z]{1,3}",
    ]
    .prop_filter("reserved", |n| {
        n != "__name__" && n != "le" && n != "quantile"
    })
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => (0u32..100_000).prop_map(f64::from),
        4 => any::<f64>(),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(-0.0),
    ]
}

/// Labels, value and timestamp of an exemplar.
type ExemplarSpec = (Vec<(String, String)>, f64, Option<f64>);

#[derive(Debug, Clone)]
struct SampleSpec {
    suffix_index: usize,
    labels: Vec<(String, String)>,
    value: f64,
    timestamp_ms: Option<i64>,
    timestamp_s: Option<f64>,
    exemplar: Option<ExemplarSpec>,
}

#[derive(Debug, Clone)]
struct FamilySpec {
    kind: MetricType,
    quoted: bool,
    help: Option<String>,
    samples: Vec<SampleSpec>,
}

fn sample() -> impl Strategy<Value = SampleSpec> {
    (
        0usize..4,
        proptest::collection::btree_map(label_name(), "[^\r]{0,8}", 0..4),
        value(),
        proptest::option::of(-(1i64 << 40)..(1i64 << 40)),
        proptest::option::of(-1e12f64..1e12),
        proptest::option::weighted(
            0.2,
            (
                proptest::collection::btree_map("[a-z]{1,4}", "[a-z0-9]{0,8}", 0..3),
                value(),
                proptest::option::of(0f64..2e9),
            ),
        ),
    )
        .prop_map(|(suffix_index, labels, value, ms, s, ex)| SampleSpec {
            suffix_index,
            labels: labels.into_iter().collect(),
            value,
            timestamp_ms: ms,
            timestamp_s: s,
            exemplar: ex.map(|(l, v, t)| (l.into_iter().collect(), v, t)),
        })
}

fn family(format: Format) -> impl Strategy<Value = FamilySpec> {
    let kinds: Vec<MetricType> = match format {
        Format::PrometheusText => vec![
            MetricType::Counter,
            MetricType::Gauge,
            MetricType::Histogram,
            MetricType::Summary,
            MetricType::Unknown,
        ],
        Format::OpenMetrics => vec![
            MetricType::Counter,
            MetricType::Gauge,
            MetricType::Histogram,
            MetricType::GaugeHistogram,
            MetricType::Summary,
            MetricType::Info,
            MetricType::StateSet,
            MetricType::Unknown,
        ],
    };
    (
        proptest::sample::select(kinds),
        proptest::bool::weighted(0.15),
        proptest::option::of(free_text()),
        proptest::collection::vec(sample(), 0..5),
    )
        .prop_map(|(kind, quoted, help, samples)| FamilySpec {
            kind,
            quoted,
            help,
            samples,
        })
}

fn build(format: Format, specs: &[FamilySpec]) -> Exposition<'static> {
    let mut exp = Exposition::new(format);
    for (i, spec) in specs.iter().enumerate() {
        // Unique names that are never a prefix of one another's sample names.
        let name = if spec.quoted {
            format!("f{i}n.é")
        } else {
            format!("f{i}n")
        };
        let mut samples = spec.samples.clone();
        if spec.help.is_none() && spec.kind == MetricType::Unknown && samples.is_empty() {
            continue; // Nothing would be written for it.
        }
        if spec.help.is_none() && spec.kind == MetricType::Unknown {
            samples.iter_mut().for_each(|s| s.suffix_index = 0);
        }
        exp.push_family(
            name.clone(),
            spec.kind,
            spec.help.clone().map(Cow::Owned),
            None,
        );
        let suffixes = spec.kind.suffixes();
        for s in samples {
            let suffix = suffixes[s.suffix_index % suffixes.len()];
            let mut labels: Vec<(String, String)> = s.labels.clone();
            if suffix == "_bucket" {
                labels.push(("le".into(), "+Inf".into()));
            }
            if spec.kind == MetricType::StateSet {
                labels.push((name.clone(), "state".into()));
            }
            let timestamp = match format {
                Format::PrometheusText => s.timestamp_ms.map(|ms| ms as f64 / 1000.0),
                Format::OpenMetrics => s.timestamp_s,
            };
            exp.push_sample(format!("{name}{suffix}"), labels, s.value, timestamp);
            if format == Format::OpenMetrics
                && let Some((labels, value, ts)) = s.exemplar
            {
                exp.set_last_exemplar(Exemplar {
                    labels: labels.into_iter().map(|(n, v)| Label::new(n, v)).collect(),
                    value,
                    timestamp: ts,
                });
            }
        }
    }
    exp
}

fn check(format: Format, style: FloatStyle, specs: &[FamilySpec]) -> Result<(), TestCaseError> {
    let original = build(format, specs);
    let text = write(
        &original,
        WriteOptions {
            format,
            float_style: style,
        },
    );
    let parsed = parse_with(
        text.as_bytes(),
        ParseOptions {
            format: Some(format),
            strict: false,
        },
    )
    .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    prop_assert_eq!(&parsed, &original, "text:\n{}", text);
    // Writing what was parsed gives the same text again.
    prop_assert_eq!(
        write(
            &parsed,
            WriteOptions {
                format,
                float_style: style
            }
        ),
        text
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn prometheus_text_round_trips(specs in proptest::collection::vec(family(Format::PrometheusText), 0..6),
                                   go in any::<bool>()) {
        let style = if go { FloatStyle::Go } else { FloatStyle::Python };
        check(Format::PrometheusText, style, &specs)?;
    }

    #[test]
    fn openmetrics_round_trips(specs in proptest::collection::vec(family(Format::OpenMetrics), 0..6)) {
        check(Format::OpenMetrics, FloatStyle::Go, &specs)?;
    }
}
