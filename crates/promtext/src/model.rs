//! The in-memory form of an exposition: families, samples, labels.
//!
//! An [`Exposition`] keeps every family, sample and label in three flat vectors, so that parsing a
//! scrape costs a handful of growing allocations rather than one or more per sample. Names and
//! label values are [`Cow`]s: they borrow from the scraped text unless an escape sequence had to
//! be decoded. The same type is used to *build* an exposition (the simulator serves `/metrics`
//! from one), in which case the strings are usually `'static` or owned.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

/// Which of the two text formats a body is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// The Prometheus text format, versions 0.0.4 and 1.0.0 (`text/plain`).
    PrometheusText,
    /// OpenMetrics 1.0 text (`application/openmetrics-text`), which ends with `# EOF`.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` a server sends for this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// Picks the format from a `Content-Type` header value, if it names one.
    ///
    /// ```
    /// use inferscale_promtext::Format;
    /// assert_eq!(
    ///     Format::from_content_type("application/openmetrics-text; version=1.0.0"),
    ///     Some(Format::OpenMetrics)
    /// );
    /// assert_eq!(Format::from_content_type("text/plain; version=1.0.0"), Some(Format::PrometheusText));
    /// assert_eq!(Format::from_content_type("application/json"), None);
    /// ```
    pub fn from_content_type(content_type: &str) -> Option<Format> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        if media.eq_ignore_ascii_case("application/openmetrics-text") {
            Some(Format::OpenMetrics)
        } else if media.eq_ignore_ascii_case("text/plain") {
            Some(Format::PrometheusText)
        } else {
            None
        }
    }

    /// Guesses the format from the text itself: OpenMetrics bodies end with a `# EOF` line.
    ///
    /// ```
    /// use inferscale_promtext::Format;
    /// assert_eq!(Format::detect(b"a 1\n# EOF\n"), Format::OpenMetrics);
    /// assert_eq!(Format::detect(b"a 1\n"), Format::PrometheusText);
    /// ```
    pub fn detect(text: &[u8]) -> Format {
        let trimmed = text.trim_ascii_end();
        let last_line = match memchr::memrchr(b'\n', trimmed) {
            Some(i) => &trimmed[i + 1..],
            None => trimmed,
        };
        if last_line == b"# EOF" {
            Format::OpenMetrics
        } else {
            Format::PrometheusText
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::PrometheusText => "prometheus-text",
            Format::OpenMetrics => "openmetrics",
        })
    }
}

/// The declared type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricType {
    /// A monotonic counter (`_total`, `_created`).
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Cumulative buckets (`_bucket` with `le`), `_sum`, `_count`, `_created`.
    Histogram,
    /// OpenMetrics gauge histogram (`_bucket`, `_gcount`, `_gsum`).
    GaugeHistogram,
    /// Pre-computed quantiles (`quantile` label), `_sum`, `_count`, `_created`.
    Summary,
    /// OpenMetrics info (`_info`, value 1).
    Info,
    /// OpenMetrics state set (one label named after the family, values 0/1).
    StateSet,
    /// No type declared: `untyped` in Prometheus text, `unknown` in OpenMetrics.
    Unknown,
}

impl MetricType {
    /// Parses a `# TYPE` keyword. `untyped` and `unknown` are both accepted here; the strict
    /// OpenMetrics mode rejects `untyped` separately.
    pub fn from_keyword(s: &str) -> Option<MetricType> {
        Some(match s {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "gaugehistogram" => MetricType::GaugeHistogram,
            "summary" => MetricType::Summary,
            "info" => MetricType::Info,
            "stateset" => MetricType::StateSet,
            "untyped" | "unknown" => MetricType::Unknown,
            _ => return None,
        })
    }

    /// The `# TYPE` keyword for this type in `format`.
    pub fn keyword(self, format: Format) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
            MetricType::Unknown => match format {
                Format::PrometheusText => "untyped",
                Format::OpenMetrics => "unknown",
            },
        }
    }

    /// The sample-name suffixes a family of this type may carry, in OpenMetrics terms. The empty
    /// suffix means a sample named exactly like the family.
    pub fn suffixes(self) -> &'static [&'static str] {
        match self {
            MetricType::Counter => &["_total", "_created", ""],
            MetricType::Gauge | MetricType::StateSet | MetricType::Unknown => &[""],
            MetricType::Histogram => &["_bucket", "_count", "_sum", "_created"],
            MetricType::GaugeHistogram => &["_bucket", "_gcount", "_gsum"],
            MetricType::Summary => &["", "_count", "_sum", "_created"],
            MetricType::Info => &["_info"],
        }
    }
}

impl fmt::Display for MetricType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword(Format::OpenMetrics))
    }
}

/// One `name="value"` pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Label<'a> {
    /// The label name (unescaped if it was quoted).
    pub name: Cow<'a, str>,
    /// The label value, unescaped.
    pub value: Cow<'a, str>,
}

impl<'a> Label<'a> {
    /// A label from anything string-like.
    pub fn new(name: impl Into<Cow<'a, str>>, value: impl Into<Cow<'a, str>>) -> Self {
        Label {
            name: name.into(),
            value: value.into(),
        }
    }

    fn into_owned(self) -> Label<'static> {
        Label {
            name: Cow::Owned(self.name.into_owned()),
            value: Cow::Owned(self.value.into_owned()),
        }
    }
}

/// An OpenMetrics exemplar attached to a counter or bucket sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar<'a> {
    /// The exemplar's own label set (often a trace id).
    pub labels: Vec<Label<'a>>,
    /// The observed value.
    pub value: f64,
    /// When it was observed, in seconds since the epoch.
    pub timestamp: Option<f64>,
}

impl Exemplar<'_> {
    fn into_owned(self) -> Exemplar<'static> {
        Exemplar {
            labels: self.labels.into_iter().map(Label::into_owned).collect(),
            value: self.value,
            timestamp: self.timestamp,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct FamilyData<'a> {
    pub(crate) name: Cow<'a, str>,
    pub(crate) kind: MetricType,
    /// Whether a `# TYPE` line declared the type (rather than it being inferred as unknown).
    pub(crate) typed: bool,
    pub(crate) help: Option<Cow<'a, str>>,
    pub(crate) unit: Option<Cow<'a, str>>,
    pub(crate) samples: Range<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct SampleData<'a> {
    pub(crate) name: Cow<'a, str>,
    pub(crate) labels: Range<u32>,
    pub(crate) value: f64,
    /// Seconds since the epoch (Prometheus text's milliseconds are converted).
    pub(crate) timestamp: Option<f64>,
    pub(crate) exemplar: Option<Box<Exemplar<'a>>>,
    /// 1-based line of the sample in the parsed text (0 when built in memory).
    pub(crate) line: u32,
}

/// A parsed or built exposition: an ordered list of metric families.
#[derive(Debug, Clone)]
pub struct Exposition<'a> {
    pub(crate) format: Format,
    pub(crate) families: Vec<FamilyData<'a>>,
    pub(crate) samples: Vec<SampleData<'a>>,
    pub(crate) labels: Vec<Label<'a>>,
}

impl<'a> Exposition<'a> {
    /// An empty exposition, to be filled with [`Exposition::push_family`] and
    /// [`Exposition::push_sample`].
    pub fn new(format: Format) -> Self {
        Exposition {
            format,
            families: Vec::new(),
            samples: Vec::new(),
            labels: Vec::new(),
        }
    }

    /// The format this exposition was parsed from, or will be written in by default.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Number of families.
    pub fn family_count(&self) -> usize {
        self.families.len()
    }

    /// Number of samples over all families.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// The families in order of appearance.
    pub fn families(&self) -> impl ExactSizeIterator<Item = Family<'_, 'a>> + '_ {
        self.families.iter().map(move |data| Family {
            exposition: self,
            data,
        })
    }

    /// The first family with this exact name (as declared: counters in OpenMetrics are named
    /// without `_total`, in Prometheus text with it).
    pub fn family(&self, name: &str) -> Option<Family<'_, 'a>> {
        self.families().find(|f| f.name() == name)
    }

    /// Every sample whose own name is `name`, whatever family it was filed under.
    pub fn samples_named<'e>(&'e self, name: &'e str) -> impl Iterator<Item = Sample<'e, 'a>> + 'e {
        self.samples
            .iter()
            .filter(move |s| s.name == name)
            .map(move |data| self.sample(data))
    }

    /// Every sample in order.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = Sample<'_, 'a>> + '_ {
        self.samples.iter().map(move |data| self.sample(data))
    }

    fn sample<'e>(&'e self, data: &'e SampleData<'a>) -> Sample<'e, 'a> {
        let r = data.labels.start as usize..data.labels.end as usize;
        Sample {
            data,
            labels: &self.labels[r],
        }
    }

    /// Starts a new family; the samples pushed after it belong to it.
    pub fn push_family(
        &mut self,
        name: impl Into<Cow<'a, str>>,
        kind: MetricType,
        help: Option<Cow<'a, str>>,
        unit: Option<Cow<'a, str>>,
    ) {
        let at = self.samples.len() as u32;
        self.families.push(FamilyData {
            name: name.into(),
            kind,
            typed: kind != MetricType::Unknown,
            help,
            unit,
            samples: at..at,
        });
    }

    /// Adds a sample to the last family (or to a new unknown family of the same name when there
    /// is none yet).
    pub fn push_sample<N, V>(
        &mut self,
        name: impl Into<Cow<'a, str>>,
        labels: impl IntoIterator<Item = (N, V)>,
        value: f64,
        timestamp: Option<f64>,
    ) where
        N: Into<Cow<'a, str>>,
        V: Into<Cow<'a, str>>,
    {
        let name = name.into();
        if self.families.is_empty() {
            self.push_family(name.clone(), MetricType::Unknown, None, None);
        }
        let start = self.labels.len() as u32;
        self.labels
            .extend(labels.into_iter().map(|(n, v)| Label::new(n, v)));
        let end = self.labels.len() as u32;
        self.push_sample_data(SampleData {
            name,
            labels: start..end,
            value,
            timestamp,
            exemplar: None,
            line: 0,
        });
    }

    /// Attaches an exemplar to the last sample pushed.
    pub fn set_last_exemplar(&mut self, exemplar: Exemplar<'a>) {
        if let Some(s) = self.samples.last_mut() {
            s.exemplar = Some(Box::new(exemplar));
        }
    }

    pub(crate) fn push_sample_data(&mut self, data: SampleData<'a>) {
        self.samples.push(data);
        let end = self.samples.len() as u32;
        if let Some(f) = self.families.last_mut() {
            f.samples.end = end;
        }
    }

    /// Copies every borrowed string so the exposition outlives the text it was parsed from.
    pub fn into_owned(self) -> Exposition<'static> {
        fn own(c: Cow<'_, str>) -> Cow<'static, str> {
            Cow::Owned(c.into_owned())
        }
        Exposition {
            format: self.format,
            families: self
                .families
                .into_iter()
                .map(|f| FamilyData {
                    name: own(f.name),
                    kind: f.kind,
                    typed: f.typed,
                    help: f.help.map(own),
                    unit: f.unit.map(own),
                    samples: f.samples,
                })
                .collect(),
            samples: self
                .samples
                .into_iter()
                .map(|s| SampleData {
                    name: own(s.name),
                    labels: s.labels,
                    value: s.value,
                    timestamp: s.timestamp,
                    exemplar: s.exemplar.map(|e| Box::new(e.into_owned())),
                    line: s.line,
                })
                .collect(),
            labels: self.labels.into_iter().map(Label::into_owned).collect(),
        }
    }
}

/// Two expositions are equal when they hold the same families with the same metadata and the
/// same samples, in the same order. Values compare bit-for-bit so that `NaN == NaN`; the format
/// and the source line numbers are not compared.
impl PartialEq for Exposition<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.families.len() == other.families.len()
            && self.families().zip(other.families()).all(|(a, b)| a == b)
    }
}

/// A family inside an [`Exposition`].
#[derive(Clone, Copy)]
pub struct Family<'e, 'a> {
    exposition: &'e Exposition<'a>,
    data: &'e FamilyData<'a>,
}

impl<'e, 'a> Family<'e, 'a> {
    /// The family name as declared.
    pub fn name(&self) -> &'e str {
        &self.data.name
    }

    /// The declared type ([`MetricType::Unknown`] when there was no `# TYPE`).
    pub fn kind(&self) -> MetricType {
        self.data.kind
    }

    /// The `# HELP` text, unescaped; `None` when there was no HELP line.
    pub fn help(&self) -> Option<&'e str> {
        self.data.help.as_deref()
    }

    /// The OpenMetrics `# UNIT`, if any.
    pub fn unit(&self) -> Option<&'e str> {
        self.data.unit.as_deref()
    }

    /// Number of samples in this family.
    pub fn len(&self) -> usize {
        self.data.samples.len()
    }

    /// Whether the family has no samples (metadata only).
    pub fn is_empty(&self) -> bool {
        self.data.samples.is_empty()
    }

    /// The samples of this family, in order.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = Sample<'e, 'a>> + 'e {
        let exp = self.exposition;
        let r = self.data.samples.start as usize..self.data.samples.end as usize;
        exp.samples[r].iter().map(move |d| exp.sample(d))
    }
}

impl fmt::Debug for Family<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.name())
            .field("kind", &self.kind())
            .field("help", &self.help())
            .field("unit", &self.unit())
            .field("samples", &self.samples().collect::<Vec<_>>())
            .finish()
    }
}

impl PartialEq for Family<'_, '_> {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
            && self.kind() == other.kind()
            && self.help() == other.help()
            && self.unit() == other.unit()
            && self.len() == other.len()
            && self.samples().zip(other.samples()).all(|(a, b)| a == b)
    }
}

/// One sample line.
#[derive(Clone, Copy)]
pub struct Sample<'e, 'a> {
    data: &'e SampleData<'a>,
    labels: &'e [Label<'a>],
}

impl<'e, 'a> Sample<'e, 'a> {
    /// The sample's own name, suffix included (`foo_bucket`, `foo_total`).
    pub fn name(&self) -> &'e str {
        &self.data.name
    }

    /// The labels in the order they were written.
    pub fn labels(&self) -> &'e [Label<'a>] {
        self.labels
    }

    /// The value of the label called `name`, if present.
    pub fn label(&self, name: &str) -> Option<&'e str> {
        self.labels
            .iter()
            .find(|l| l.name == name)
            .map(|l| &*l.value)
    }

    /// The sample value.
    pub fn value(&self) -> f64 {
        self.data.value
    }

    /// The timestamp in seconds since the epoch, if the line had one.
    pub fn timestamp(&self) -> Option<f64> {
        self.data.timestamp
    }

    /// The exemplar, if the line had one.
    pub fn exemplar(&self) -> Option<&'e Exemplar<'a>> {
        self.data.exemplar.as_deref()
    }

    /// The 1-based line the sample came from (0 for samples built in memory).
    pub fn line(&self) -> u32 {
        self.data.line
    }
}

impl fmt::Debug for Sample<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Sample");
        d.field("name", &self.name());
        d.field(
            "labels",
            &self
                .labels()
                .iter()
                .map(|l| (&*l.name, &*l.value))
                .collect::<Vec<_>>(),
        );
        d.field("value", &self.value());
        if let Some(ts) = self.timestamp() {
            d.field("timestamp", &ts);
        }
        if let Some(e) = self.exemplar() {
            d.field("exemplar", e);
        }
        d.finish()
    }
}

fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

impl PartialEq for Sample<'_, '_> {
    fn eq(&self, other: &Self) -> bool {
        let ts_eq = match (self.timestamp(), other.timestamp()) {
            (None, None) => true,
            (Some(a), Some(b)) => same_f64(a, b),
            _ => false,
        };
        let ex_eq = match (self.exemplar(), other.exemplar()) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.labels == b.labels
                    && same_f64(a.value, b.value)
                    && match (a.timestamp, b.timestamp) {
                        (None, None) => true,
                        (Some(x), Some(y)) => same_f64(x, y),
                        _ => false,
                    }
            }
            _ => false,
        };
        self.name() == other.name()
            && self.labels() == other.labels()
            && same_f64(self.value(), other.value())
            && ts_eq
            && ex_eq
    }
}
