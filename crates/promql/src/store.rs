//! An in-memory series store: what a Prometheus server's TSDB holds, kept in vectors.
//!
//! Scrapes go in through [`Store::scrape`] (or [`Store::push`] for samples one by one). As
//! Prometheus does, a scrape attaches the target's labels (`instance`, `job`, …), renames a
//! scraped label that collides with one of them to `exported_<name>`, writes `up`, and writes a
//! *staleness marker* for every series the target served last time and not this time — and
//! for all of them when the scrape failed — so that a vanished series disappears from instant
//! queries at once instead of lingering for the 5-minute lookback.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use inferscale_promtext::Exposition;

/// The value Prometheus writes as a staleness marker (a NaN with a particular bit pattern).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// Whether `v` is a staleness marker (not any NaN: only Prometheus' own bit pattern).
pub fn is_stale(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// The label that holds a series' metric name.
pub const NAME: &str = "__name__";

/// A series' labels, sorted by name, the metric name (`__name__`) among them. A label whose
/// value is empty is the same as no label, as in Prometheus, and is not kept.
///
/// Shared: a clone is a reference count (queries copy the labels of every series they
/// touch), and a change copies the pairs first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Labels(Arc<Vec<(Arc<str>, Arc<str>)>>);

impl Labels {
    /// Labels from pairs; a later pair wins over an earlier one of the same name.
    pub fn new<N: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (N, V)>) -> Self {
        let mut l = Labels::default();
        for (n, v) in pairs {
            l.set(n.into(), v.into());
        }
        l
    }

    /// The value of `name`, `""` when absent (PromQL's reading).
    pub fn get(&self, name: &str) -> &str {
        match self.0.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => &self.0[i].1,
            Err(_) => "",
        }
    }

    /// Whether `name` is present.
    pub fn has(&self, name: &str) -> bool {
        !self.get(name).is_empty()
    }

    /// The metric name.
    pub fn name(&self) -> Option<&str> {
        Some(self.get(NAME)).filter(|n| !n.is_empty())
    }

    /// Sets `name` (an empty value removes it).
    pub fn set(&mut self, name: String, value: String) {
        self.set_shared(name.into(), value.into());
    }

    /// [`Labels::set`] with names and values that are already shared.
    pub fn set_shared(&mut self, name: Arc<str>, value: Arc<str>) {
        match self.0.binary_search_by(|(n, _)| n.cmp(&name)) {
            Ok(i) if value.is_empty() => {
                Arc::make_mut(&mut self.0).remove(i);
            }
            Ok(i) => Arc::make_mut(&mut self.0)[i].1 = value,
            Err(_) if value.is_empty() => {}
            Err(i) => Arc::make_mut(&mut self.0).insert(i, (name, value)),
        }
    }

    /// Removes `name`.
    pub fn remove(&mut self, name: &str) {
        if let Ok(i) = self.0.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Arc::make_mut(&mut self.0).remove(i);
        }
    }

    /// These labels without the metric name.
    pub fn without_name(&self) -> Labels {
        let mut l = self.clone();
        l.remove(NAME);
        l
    }

    /// Only the labels named in `names`.
    pub fn keep(&self, names: &[String]) -> Labels {
        Labels(Arc::new(
            self.0
                .iter()
                .filter(|(n, _)| names.iter().any(|k| **k == **n))
                .cloned()
                .collect(),
        ))
    }

    /// All labels but those named in `names`.
    pub fn drop_names(&self, names: &[String]) -> Labels {
        Labels(Arc::new(
            self.0
                .iter()
                .filter(|(n, _)| !names.iter().any(|k| **k == **n))
                .cloned()
                .collect(),
        ))
    }

    /// The pairs, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (&**n, &**v))
    }

    /// The pairs, shared, in name order.
    pub fn shared(&self) -> impl Iterator<Item = &(Arc<str>, Arc<str>)> {
        self.0.iter()
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No labels at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `name{a="1", b="2"}`, as Prometheus prints a series.
impl fmt::Display for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(n) = self.name() {
            f.write_str(n)?;
        }
        f.write_str("{")?;
        let mut first = true;
        for (n, v) in self.iter().filter(|(n, _)| *n != NAME) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{n}={}", crate::quote(v))?;
        }
        f.write_str("}")
    }
}

/// One sample of a series: milliseconds since the Unix epoch and a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Milliseconds since the Unix epoch.
    pub t: i64,
    /// The value (a [staleness marker](is_stale) ends the series there).
    pub v: f64,
}

/// One series and its samples in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its labels.
    pub labels: Labels,
    /// Its samples, oldest first, no two at the same time.
    pub points: Vec<Point>,
}

/// Why a sample was not stored.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// At or before the series' newest sample (Prometheus refuses these too).
    #[error("out-of-order sample for {labels} at {t} ms: the series already has one at {last} ms")]
    OutOfOrder {
        /// The series.
        labels: Labels,
        /// The refused sample's time.
        t: i64,
        /// The series' newest sample.
        last: i64,
    },
    /// A series without a metric name.
    #[error("a sample without a metric name ({labels})")]
    NoName {
        /// Its labels.
        labels: Labels,
    },
}

/// Series in memory, indexed by labels and by metric name.
#[derive(Debug, Clone, Default)]
pub struct Store {
    series: Vec<Series>,
    index: HashMap<Labels, usize>,
    by_name: HashMap<String, Vec<usize>>,
    /// For each target (its labels), the series its last scrape wrote.
    last_scrape: HashMap<Labels, HashSet<usize>>,
}

/// What one [`Store::scrape`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScrapeWrite {
    /// Samples stored.
    pub samples: usize,
    /// Samples refused (out of order, or duplicates within the scrape).
    pub refused: usize,
    /// Staleness markers written for series the target no longer serves.
    pub stale_marked: usize,
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Store::default()
    }

    /// Every series.
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// How many samples in all.
    pub fn sample_count(&self) -> usize {
        self.series.iter().map(|s| s.points.len()).sum()
    }

    /// The series named `name`.
    pub fn named(&self, name: &str) -> impl Iterator<Item = &Series> {
        self.by_name
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &self.series[i])
    }

    fn slot(&mut self, labels: Labels) -> Result<usize, StoreError> {
        if let Some(&i) = self.index.get(&labels) {
            return Ok(i);
        }
        let Some(name) = labels.name().map(str::to_owned) else {
            return Err(StoreError::NoName { labels });
        };
        let i = self.series.len();
        self.series.push(Series {
            labels: labels.clone(),
            points: Vec::new(),
        });
        self.index.insert(labels, i);
        self.by_name.entry(name).or_default().push(i);
        Ok(i)
    }

    fn push_at(&mut self, i: usize, t: i64, v: f64) -> Result<(), StoreError> {
        let s = &mut self.series[i];
        if let Some(last) = s.points.last()
            && last.t >= t
        {
            return Err(StoreError::OutOfOrder {
                labels: s.labels.clone(),
                t,
                last: last.t,
            });
        }
        s.points.push(Point { t, v });
        Ok(())
    }

    /// Stores one sample (time in ms since the epoch).
    pub fn push(&mut self, labels: Labels, t: i64, v: f64) -> Result<(), StoreError> {
        let i = self.slot(labels)?;
        self.push_at(i, t, v)
    }

    /// Stores one scrape of the target with labels `target` taken at `t` (ms), as Prometheus
    /// does with `honor_labels: false`: the target's labels win, a clashing scraped label is
    /// kept as `exported_<name>`, samples that carry their own timestamp keep it, `up` is 1,
    /// and series the target served last time and not now get a staleness marker.
    /// `exposition: None` is a failed scrape: `up` is 0 and every series of the target goes
    /// stale.
    pub fn scrape(
        &mut self,
        target: &Labels,
        t: i64,
        exposition: Option<&Exposition<'_>>,
    ) -> ScrapeWrite {
        let mut w = ScrapeWrite::default();
        let mut now: HashSet<usize> = HashSet::new();
        if let Some(exp) = exposition {
            for s in exp.samples() {
                let mut l = Labels::default();
                l.set(NAME.to_owned(), s.name().to_owned());
                for lab in s.labels() {
                    let name = if target.has(&lab.name) {
                        format!("exported_{}", lab.name)
                    } else {
                        lab.name.to_string()
                    };
                    l.set(name, lab.value.to_string());
                }
                for (n, v) in target.shared() {
                    l.set_shared(n.clone(), v.clone());
                }
                let at = s.timestamp().map_or(t, |ts| (ts * 1000.0).round() as i64);
                match self.slot(l) {
                    Ok(i) if now.insert(i) && self.push_at(i, at, s.value()).is_ok() => {
                        w.samples += 1
                    }
                    _ => w.refused += 1,
                }
            }
        }
        let mut up = target.clone();
        up.set(NAME.to_owned(), "up".to_owned());
        if let Ok(i) = self.slot(up)
            && self
                .push_at(i, t, if exposition.is_some() { 1.0 } else { 0.0 })
                .is_ok()
        {
            w.samples += 1;
        }
        let before = self.last_scrape.remove(target).unwrap_or_default();
        for i in before.difference(&now) {
            if self.push_at(*i, t, f64::from_bits(STALE_NAN_BITS)).is_ok() {
                w.stale_marked += 1;
            }
        }
        self.last_scrape.insert(target.clone(), now);
        w
    }

    /// Retention: drops every sample older than `cutoff` (ms) and the series left without
    /// one, as Prometheus' head compaction does past its retention. A long virtual-time run
    /// (a day of pods coming and going) keeps queries as fast as its first hour this way.
    /// Returns how many series were dropped.
    pub fn retain_after(&mut self, cutoff: i64) -> usize {
        let mut map = vec![usize::MAX; self.series.len()];
        let mut kept = Vec::with_capacity(self.series.len());
        for (i, mut s) in std::mem::take(&mut self.series).into_iter().enumerate() {
            let first = s.points.partition_point(|p| p.t < cutoff);
            s.points.drain(..first);
            if !s.points.is_empty() {
                map[i] = kept.len();
                kept.push(s);
            }
        }
        let dropped = map.len() - kept.len();
        self.series = kept;
        self.index.retain(|_, i| {
            *i = map[*i];
            *i != usize::MAX
        });
        for ids in self.by_name.values_mut() {
            ids.retain_mut(|i| {
                *i = map[*i];
                *i != usize::MAX
            });
        }
        self.by_name.retain(|_, ids| !ids.is_empty());
        for set in self.last_scrape.values_mut() {
            *set = set
                .iter()
                .map(|&i| map[i])
                .filter(|&i| i != usize::MAX)
                .collect();
        }
        dropped
    }

    /// The target is gone (its pod was deleted): as Prometheus does when service discovery
    /// drops a target, every series it served last gets a staleness marker at `t` (ms), and
    /// no `up` sample is written. Returns how many markers were written.
    pub fn forget(&mut self, target: &Labels, t: i64) -> usize {
        let before = self.last_scrape.remove(target).unwrap_or_default();
        let mut n = 0;
        for i in before {
            if self.push_at(i, t, f64::from_bits(STALE_NAN_BITS)).is_ok() {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_drops_old_samples_and_empty_series_and_keeps_the_rest_findable() {
        let mut st = Store::new();
        let a = Labels::new([(NAME, "m"), ("pod", "a")]);
        let b = Labels::new([(NAME, "m"), ("pod", "b")]);
        for t in 0..10 {
            st.push(a.clone(), t * 1000, t as f64)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        st.push(b.clone(), 20_000, 1.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(st.retain_after(15_000), 1, "a had nothing after 15 s");
        assert_eq!(st.named("m").count(), 1);
        assert_eq!(st.named("m").next().map(|s| s.labels.get("pod")), Some("b"));
        // The kept series still takes samples; the dropped one starts afresh.
        st.push(b, 21_000, 2.0).unwrap_or_else(|e| panic!("{e}"));
        st.push(a, 22_000, 3.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(st.sample_count(), 3);
    }

    #[test]
    fn labels_are_sorted_and_empty_means_absent() {
        let l = Labels::new([("b", "2"), ("a", "1"), ("c", ""), (NAME, "m")]);
        assert_eq!(l.to_string(), "m{a=\"1\", b=\"2\"}");
        assert_eq!(l.get("c"), "");
        assert_eq!(l.len(), 3);
        assert_eq!(l.without_name().to_string(), "{a=\"1\", b=\"2\"}");
    }

    #[test]
    fn a_series_that_leaves_the_scrape_is_marked_stale() {
        let two = inferscale_promtext::parse(b"a 1\nb 2\n").unwrap();
        let one = inferscale_promtext::parse(b"a 3\n").unwrap();
        let target = Labels::new([("instance", "x"), ("job", "j")]);
        let mut s = Store::new();
        assert_eq!(s.scrape(&target, 1000, Some(&two)).samples, 3);
        let w = s.scrape(&target, 2000, Some(&one));
        assert_eq!((w.samples, w.stale_marked), (2, 1));
        let b = s.named("b").next().unwrap();
        assert!(is_stale(b.points[1].v));
        let w = s.scrape(&target, 3000, None);
        assert_eq!(w.stale_marked, 1);
        let up: Vec<f64> = s
            .named("up")
            .next()
            .unwrap()
            .points
            .iter()
            .map(|p| p.v)
            .collect();
        assert_eq!(up, [1.0, 1.0, 0.0]);
    }

    #[test]
    fn a_clashing_label_is_exported() {
        let exp = inferscale_promtext::parse(b"a{instance=\"inner\"} 1\n").unwrap();
        let mut s = Store::new();
        s.scrape(&Labels::new([("instance", "outer")]), 0, Some(&exp));
        let a = s.named("a").next().unwrap();
        assert_eq!(a.labels.get("instance"), "outer");
        assert_eq!(a.labels.get("exported_instance"), "inner");
    }

    #[test]
    fn out_of_order_samples_are_refused_by_name() {
        let mut s = Store::new();
        let l = Labels::new([(NAME, "x")]);
        s.push(l.clone(), 10, 1.0).unwrap();
        let e = s.push(l, 10, 2.0).unwrap_err();
        assert!(e.to_string().contains("x{} at 10 ms"), "{e}");
    }
}
