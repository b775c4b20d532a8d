//! The semantic rules of OpenMetrics 1.0 that go beyond the line grammar.
//!
//! The rules are those the official test suite's `shouldParse` verdicts encode: metric names
//! must not clash across families; units must suffix the name; counter-like samples are never
//! NaN or negative; buckets and counts are integers; summaries carry a `quantile` in [0, 1];
//! state sets and infos carry their fixed values; exemplars sit only on buckets and counter
//! totals; a label group, once left, is never resumed and its timestamps never go backwards;
//! and each histogram group has ascending buckets, a `+Inf` bucket that matches `_count`, and
//! `_sum`/`_count` together.

use std::collections::HashSet;

use crate::error::ParseError;
use crate::model::{Exposition, FamilyData, Label, MetricType, SampleData};
use crate::parse::parse_value;

type GroupKey = Vec<(String, String)>;

/// A sample that breaks one of OpenMetrics' rules (positioned by the caller).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Violation {
    NoStateLabel(String),
    NoLe,
    BadLe(String),
    NotIntegral(&'static str, f64),
    NoQuantile,
    StateSetValue(f64),
    InfoValue(f64),
    NegativeQuantile(f64),
    NaN(String),
    Negative(String),
    MisplacedExemplar,
    MixedTimestamps,
    TimestampsBackwards,
    GroupResumed,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::NoStateLabel(n) => write!(f, "stateset sample lacks the label {n:?}"),
            Violation::NoLe => f.write_str("bucket sample lacks the le label"),
            Violation::BadLe(le) => write!(
                f,
                "invalid le label {le:?} (a number, with +Inf spelt \"+Inf\")"
            ),
            Violation::NotIntegral(what, v) => write!(f, "{what} value {v} is not an integer"),
            Violation::NoQuantile => {
                f.write_str("summary quantile sample needs a quantile label between 0 and 1")
            }
            Violation::StateSetValue(v) => write!(f, "stateset values are 0 or 1, not {v}"),
            Violation::InfoValue(v) => write!(f, "info values are 1, not {v}"),
            Violation::NegativeQuantile(v) => write!(f, "quantile value {v} is negative"),
            Violation::NaN(suffix) => write!(f, "{suffix} samples cannot be NaN"),
            Violation::Negative(suffix) => write!(f, "{suffix} samples cannot be negative"),
            Violation::MisplacedExemplar => {
                f.write_str("exemplars are only allowed on histogram buckets and counter totals")
            }
            Violation::MixedTimestamps => {
                f.write_str("some samples of a group have timestamps and others not")
            }
            Violation::TimestampsBackwards => {
                f.write_str("timestamps went backwards within a group")
            }
            Violation::GroupResumed => f.write_str(
                "samples of a label group must be contiguous; this group was already closed",
            ),
        }
    }
}

/// What strict mode remembers across samples and families.
#[derive(Default)]
pub(crate) struct StrictState {
    /// Every sample name claimed by a finished family.
    seen_names: HashSet<String>,
    /// Label groups seen in the current family.
    seen_groups: HashSet<GroupKey>,
    group: Option<GroupKey>,
    group_timestamp: Option<f64>,
}

fn group_key(fam: &FamilyData<'_>, sample_name: &str, labels: &[Label<'_>]) -> GroupKey {
    let excluded: Option<&str> = match fam.kind {
        MetricType::Info => return Vec::new(),
        MetricType::Summary if sample_name == fam.name => Some("quantile"),
        MetricType::StateSet => Some(&fam.name),
        MetricType::Histogram | MetricType::GaugeHistogram
            if sample_name.strip_prefix(&*fam.name) == Some("_bucket") =>
        {
            Some("le")
        }
        _ => None,
    };
    let mut key: GroupKey = labels
        .iter()
        .filter(|l| Some(&*l.name) != excluded)
        .map(|l| (l.name.to_string(), l.value.to_string()))
        .collect();
    key.sort();
    key
}

fn is_integral(v: f64) -> bool {
    v.is_finite() && v.fract() == 0.0
}

/// A number written in the one canonical way OpenMetrics requires for infinity: `+Inf`.
fn canonical_number(s: &str) -> Option<f64> {
    let v = parse_value(s)?;
    if v == f64::INFINITY && s != "+Inf" {
        return None;
    }
    Some(v)
}

impl StrictState {
    /// Checks one sample against its family; the message is turned into a positioned error by
    /// the caller.
    pub(crate) fn check_sample(
        &mut self,
        fam: &FamilyData<'_>,
        s: &SampleData<'_>,
        labels: &[Label<'_>],
    ) -> Result<(), Violation> {
        let name: &str = &s.name;
        let suffix = &name[fam.name.len().min(name.len())..];
        let label = |n: &str| labels.iter().find(|l| l.name == n).map(|l| &*l.value);
        let kind = fam.kind;
        if kind == MetricType::StateSet && label(&fam.name).is_none() {
            return Err(Violation::NoStateLabel(fam.name.to_string()));
        }
        let is_bucket = matches!(kind, MetricType::Histogram | MetricType::GaugeHistogram)
            && suffix == "_bucket";
        if is_bucket {
            match label("le") {
                None => return Err(Violation::NoLe),
                Some(le) => match canonical_number(le) {
                    Some(v) if !v.is_nan() => {}
                    _ => return Err(Violation::BadLe(le.to_owned())),
                },
            }
            if !is_integral(s.value) {
                return Err(Violation::NotIntegral("bucket", s.value));
            }
        }
        if (suffix == "_count" || suffix == "_gcount") && !is_integral(s.value) {
            return Err(Violation::NotIntegral("count", s.value));
        }
        let is_quantile = kind == MetricType::Summary && suffix.is_empty();
        if is_quantile {
            let q = label("quantile").and_then(canonical_number);
            if !q.is_some_and(|q| (0.0..=1.0).contains(&q)) {
                return Err(Violation::NoQuantile);
            }
        }
        self.check_grouping(fam, s, labels)?;
        match kind {
            MetricType::StateSet if s.value != 0.0 && s.value != 1.0 => {
                return Err(Violation::StateSetValue(s.value));
            }
            MetricType::Info if s.value != 1.0 => {
                return Err(Violation::InfoValue(s.value));
            }
            _ => {}
        }
        if is_quantile && s.value < 0.0 {
            return Err(Violation::NegativeQuantile(s.value));
        }
        let counter_like = matches!(
            suffix,
            "_total" | "_sum" | "_count" | "_bucket" | "_gcount" | "_gsum"
        );
        if counter_like && s.value.is_nan() {
            return Err(Violation::NaN(suffix.to_owned()));
        }
        if counter_like && suffix != "_gsum" && s.value < 0.0 {
            return Err(Violation::Negative(suffix.to_owned()));
        }
        if s.exemplar.is_some()
            && !(is_bucket || (kind == MetricType::Counter && suffix == "_total"))
        {
            return Err(Violation::MisplacedExemplar);
        }
        Ok(())
    }

    fn check_grouping(
        &mut self,
        fam: &FamilyData<'_>,
        s: &SampleData<'_>,
        labels: &[Label<'_>],
    ) -> Result<(), Violation> {
        let g = group_key(fam, &s.name, labels);
        match &self.group {
            Some(current) if *current == g => {
                if s.timestamp.is_some() != self.group_timestamp.is_some() {
                    return Err(Violation::MixedTimestamps);
                }
                if let (Some(prev), Some(ts)) = (self.group_timestamp, s.timestamp)
                    && prev > ts
                    && fam.kind != MetricType::Info
                {
                    return Err(Violation::TimestampsBackwards);
                }
            }
            Some(_) if self.seen_groups.contains(&g) => {
                return Err(Violation::GroupResumed);
            }
            _ => {}
        }
        self.group_timestamp = s.timestamp;
        self.seen_groups.insert(g.clone());
        self.group = Some(g);
        Ok(())
    }

    /// Runs the family-level checks when a family ends.
    pub(crate) fn finish_family(
        &mut self,
        exp: &Exposition<'_>,
        fam: &FamilyData<'_>,
        first_line: u32,
    ) -> Result<(), ParseError> {
        let at = |line: u32, message: String| ParseError {
            line,
            column: 1,
            message,
        };
        self.seen_groups.clear();
        self.group = None;
        self.group_timestamp = None;
        let mut suffixes: Vec<&str> = fam.kind.suffixes().to_vec();
        if !suffixes.contains(&"") {
            suffixes.push("");
        }
        for suffix in suffixes {
            let claimed = format!("{}{suffix}", fam.name);
            if !self.seen_names.insert(claimed.clone()) {
                return Err(at(
                    first_line,
                    format!("the name {claimed} clashes with an earlier family"),
                ));
            }
        }
        if let Some(unit) = fam.unit.as_deref().filter(|u| !u.is_empty()) {
            if !fam.name.ends_with(&format!("_{unit}")) {
                return Err(at(
                    first_line,
                    format!("the unit {unit:?} is not a suffix of the name {}", fam.name),
                ));
            }
            if matches!(fam.kind, MetricType::Info | MetricType::StateSet) {
                return Err(at(
                    first_line,
                    format!("{} families cannot have a unit", fam.kind),
                ));
            }
        }
        if fam.name.is_empty() || fam.name.contains('\0') {
            return Err(at(first_line, "empty or invalid metric name".to_owned()));
        }
        if matches!(fam.kind, MetricType::Histogram | MetricType::GaugeHistogram) {
            check_histogram(exp, fam).map_err(|(line, msg)| at(line, msg))?;
        }
        Ok(())
    }
}

/// The state of one histogram group while its samples are checked.
#[derive(Default)]
struct HistogramGroup {
    last_le: Option<f64>,
    last_bucket_value: f64,
    count: Option<f64>,
    has_sum: bool,
    has_gsum: bool,
    negative_buckets: bool,
    negative_gsum: bool,
    last_line: u32,
}

impl HistogramGroup {
    fn check(&self, name: &str) -> Result<(), (u32, String)> {
        let line = self.last_line;
        let fail = |m: &str| Err((line, format!("histogram {name}: {m}")));
        if self.last_le != Some(f64::INFINITY) {
            return fail("the +Inf bucket is missing");
        }
        if self.count.is_some_and(|c| c != self.last_bucket_value) {
            return fail("_count does not match the +Inf bucket");
        }
        if self.has_sum && self.count.is_none() {
            return fail("_sum is present but _count is not");
        }
        if self.has_gsum && self.count.is_none() {
            return fail("_gsum is present but _gcount is not");
        }
        if !(self.has_sum || self.has_gsum) && self.count.is_some() {
            return fail("_count is present but _sum is not");
        }
        if self.negative_buckets && self.has_sum {
            return fail("_sum is not allowed with negative buckets");
        }
        if !self.negative_buckets && self.negative_gsum {
            return fail("a negative _gsum needs negative buckets");
        }
        Ok(())
    }
}

fn check_histogram(exp: &Exposition<'_>, fam: &FamilyData<'_>) -> Result<(), (u32, String)> {
    let mut key: Option<(GroupKey, Option<u64>)> = None;
    let mut group = HistogramGroup::default();
    let range = fam.samples.start as usize..fam.samples.end as usize;
    for s in &exp.samples[range] {
        let suffix = &s.name[fam.name.len()..];
        if suffix.is_empty() {
            continue;
        }
        let labels = &exp.labels[s.labels.start as usize..s.labels.end as usize];
        let k = (
            group_key(fam, &s.name, labels),
            s.timestamp.map(f64::to_bits),
        );
        if key.as_ref() != Some(&k) {
            if key.is_some() {
                group.check(&fam.name)?;
            }
            group = HistogramGroup::default();
            key = Some(k);
        }
        group.last_line = s.line;
        match suffix {
            "_bucket" => {
                let le = labels
                    .iter()
                    .find(|l| l.name == "le")
                    .and_then(|l| parse_value(&l.value))
                    .unwrap_or(f64::NAN);
                if le < 0.0 {
                    group.negative_buckets = true;
                }
                if group.last_le.is_some_and(|prev| le <= prev) {
                    return Err((
                        s.line,
                        format!("histogram {}: buckets out of order", fam.name),
                    ));
                }
                if s.value < group.last_bucket_value {
                    return Err((
                        s.line,
                        format!("histogram {}: bucket counts decrease", fam.name),
                    ));
                }
                group.last_le = Some(le);
                group.last_bucket_value = s.value;
            }
            "_count" | "_gcount" => group.count = Some(s.value),
            "_sum" => group.has_sum = true,
            "_gsum" => {
                group.has_gsum = true;
                if s.value < 0.0 {
                    group.negative_gsum = true;
                }
            }
            _ => {}
        }
    }
    if key.is_some() {
        group.check(&fam.name)?;
    }
    Ok(())
}
