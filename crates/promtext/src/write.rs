//! The writer: an [`Exposition`] back to text, in either format.

use std::fmt::Write as _;

use crate::float::{FloatStyle, write_float};
use crate::model::{Exposition, Format, Label};
use crate::parse::{is_legacy_label_name, is_legacy_metric_name};

/// How to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// The output format.
    pub format: Format,
    /// How numbers are printed.
    pub float_style: FloatStyle,
}

impl WriteOptions {
    /// Options for `format` with Python-style numbers (what vLLM serves).
    pub fn new(format: Format) -> Self {
        WriteOptions {
            format,
            float_style: FloatStyle::Python,
        }
    }
}

/// Writes `exp` as text.
///
/// Families are written in order with their HELP, TYPE (when one was declared) and, in
/// OpenMetrics, UNIT lines. Names that are not valid classic names are quoted. Exemplars are
/// written only in OpenMetrics, which alone defines them; the OpenMetrics body ends with
/// `# EOF`.
///
/// ```
/// use inferscale_promtext::{parse, write, Format, WriteOptions};
/// let text = "# HELP q Queue.\n# TYPE q gauge\nq{m=\"a\"} 3.0\n";
/// let exp = parse(text.as_bytes()).unwrap();
/// assert_eq!(write(&exp, WriteOptions::new(Format::PrometheusText)), text);
/// ```
pub fn write(exp: &Exposition<'_>, options: WriteOptions) -> String {
    let mut out = String::with_capacity(exp.sample_count() * 64 + 64);
    write_into(&mut out, exp, options);
    out
}

/// Appends `exp` as text to `out`.
pub fn write_into(out: &mut String, exp: &Exposition<'_>, options: WriteOptions) {
    let om = options.format == Format::OpenMetrics;
    for fam in exp.families.iter() {
        if let Some(help) = &fam.help {
            out.push_str("# HELP ");
            push_metric_name(out, &fam.name);
            out.push(' ');
            push_escaped(out, help, om);
            out.push('\n');
        }
        if fam.typed {
            out.push_str("# TYPE ");
            push_metric_name(out, &fam.name);
            out.push(' ');
            out.push_str(fam.kind.keyword(options.format));
            out.push('\n');
        }
        if om && let Some(unit) = &fam.unit {
            out.push_str("# UNIT ");
            push_metric_name(out, &fam.name);
            out.push(' ');
            out.push_str(unit);
            out.push('\n');
        }
        for s in &exp.samples[fam.samples.start as usize..fam.samples.end as usize] {
            let labels = &exp.labels[s.labels.start as usize..s.labels.end as usize];
            if is_legacy_metric_name(&s.name) {
                out.push_str(&s.name);
                if !labels.is_empty() {
                    out.push('{');
                    push_labels(out, labels);
                    out.push('}');
                }
            } else {
                out.push_str("{\"");
                push_escaped(out, &s.name, true);
                out.push('"');
                if !labels.is_empty() {
                    out.push(',');
                    push_labels(out, labels);
                }
                out.push('}');
            }
            out.push(' ');
            write_float(out, s.value, options.float_style);
            if let Some(ts) = s.timestamp {
                out.push(' ');
                push_timestamp(out, ts, options.format);
            }
            if om && let Some(e) = &s.exemplar {
                out.push_str(" # {");
                push_labels(out, &e.labels);
                out.push_str("} ");
                write_float(out, e.value, FloatStyle::Go);
                if let Some(ts) = e.timestamp {
                    out.push(' ');
                    push_timestamp(out, ts, Format::OpenMetrics);
                }
            }
            out.push('\n');
        }
    }
    if om {
        out.push_str("# EOF\n");
    }
}

fn push_timestamp(out: &mut String, seconds: f64, format: Format) {
    match format {
        Format::PrometheusText => {
            let _ = write!(out, "{}", (seconds * 1000.0).round() as i64);
        }
        Format::OpenMetrics => {
            let _ = write!(out, "{seconds}");
        }
    }
}

fn push_metric_name(out: &mut String, name: &str) {
    if is_legacy_metric_name(name) {
        out.push_str(name);
    } else {
        out.push('"');
        push_escaped(out, name, true);
        out.push('"');
    }
}

fn push_labels(out: &mut String, labels: &[Label<'_>]) {
    for (i, l) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if is_legacy_label_name(&l.name) {
            out.push_str(&l.name);
        } else {
            out.push('"');
            push_escaped(out, &l.name, true);
            out.push('"');
        }
        out.push_str("=\"");
        push_escaped(out, &l.value, true);
        out.push('"');
    }
}

/// Escapes backslash and newline, and the double quote when `quote` is set (label values,
/// quoted names and OpenMetrics HELP; Prometheus-text HELP leaves quotes alone).
fn push_escaped(out: &mut String, s: &str, quote: bool) {
    let needs = s
        .bytes()
        .any(|b| b == b'\\' || b == b'\n' || (quote && b == b'"'));
    if !needs {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}
