//! An in-memory series store: what a Prometheus server's TSDB holds, kept in vectors.
//!
//! Scrapes go in through [`Store::scrape`] (or [`Store::push`] for samples one by one). As
//! Prometheus does, a scrape attaches the target's labels (`instance`, `job`, …), renames a
//! scraped label that collides with one of them to `exported_<name>`, writes `up`, and writes a
//! *staleness marker* for every series the target served last time and not this time — and
//! for all of them when the scrape failed — so that a vanished series disappears from instant
//! queries at once instead of lingering for the 5-minute lookback.

use foldhash::HashMap;
use std::cell::RefCell;
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
/// touch), a change copies the pairs first, and the metric name is held apart, so that the
/// labels without it (what every function and aggregation returns) cost a clone too.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Labels {
    name: Option<Arc<str>>,
    /// The other pairs, sorted by name.
    rest: Arc<Vec<(Arc<str>, Arc<str>)>>,
}

impl Labels {
    /// Labels from pairs; a later pair wins over an earlier one of the same name.
    pub fn new<N: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (N, V)>) -> Self {
        let mut l = Labels::default();
        for (n, v) in pairs {
            l.set(n.into(), v.into());
        }
        l
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.rest.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    /// The value of `name`, `""` when absent (PromQL's reading).
    pub fn get(&self, name: &str) -> &str {
        if name == NAME {
            return self.name.as_deref().unwrap_or("");
        }
        // A series has a handful of labels: a scan that compares lengths first beats a
        // binary search that compares bytes at every probe.
        if self.rest.len() <= 16 {
            return self
                .rest
                .iter()
                .find(|(n, _)| **n == *name)
                .map_or("", |(_, v)| &**v);
        }
        match self.find(name) {
            Ok(i) => &self.rest[i].1,
            Err(_) => "",
        }
    }

    /// Whether `name` is present.
    pub fn has(&self, name: &str) -> bool {
        !self.get(name).is_empty()
    }

    /// The metric name.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Sets `name` (an empty value removes it).
    pub fn set(&mut self, name: String, value: String) {
        self.set_shared(name.into(), value.into());
    }

    /// [`Labels::set`] with names and values that are already shared.
    pub fn set_shared(&mut self, name: Arc<str>, value: Arc<str>) {
        if &*name == NAME {
            self.name = (!value.is_empty()).then_some(value);
            return;
        }
        match self.find(&name) {
            Ok(i) if value.is_empty() => {
                Arc::make_mut(&mut self.rest).remove(i);
            }
            Ok(i) => Arc::make_mut(&mut self.rest)[i].1 = value,
            Err(_) if value.is_empty() => {}
            Err(i) => Arc::make_mut(&mut self.rest).insert(i, (name, value)),
        }
    }

    /// Removes `name`.
    pub fn remove(&mut self, name: &str) {
        if name == NAME {
            self.name = None;
        } else if let Ok(i) = self.find(name) {
            Arc::make_mut(&mut self.rest).remove(i);
        }
    }

    /// These labels without the metric name.
    pub fn without_name(&self) -> Labels {
        Labels {
            name: None,
            rest: self.rest.clone(),
        }
    }

    /// Only the labels named in `names`.
    pub fn keep(&self, names: &[String]) -> Labels {
        self.filtered(|n| names.iter().any(|k| k == n))
    }

    /// All labels but those named in `names`.
    pub fn drop_names(&self, names: &[String]) -> Labels {
        self.filtered(|n| !names.iter().any(|k| k == n))
    }

    fn filtered(&self, keep: impl Fn(&str) -> bool) -> Labels {
        Labels {
            name: self.name.clone().filter(|_| keep(NAME)),
            rest: Arc::new(self.rest.iter().filter(|(n, _)| keep(n)).cloned().collect()),
        }
    }

    /// The pairs, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let at = self.find(NAME).unwrap_or_else(|i| i);
        self.rest[..at]
            .iter()
            .map(|(n, v)| (&**n, &**v))
            .chain(self.name.as_deref().map(|v| (NAME, v)))
            .chain(self.rest[at..].iter().map(|(n, v)| (&**n, &**v)))
    }

    /// The pairs other than the metric name, shared, in name order.
    pub fn shared(&self) -> impl Iterator<Item = &(Arc<str>, Arc<str>)> {
        self.rest.iter()
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.rest.len() + usize::from(self.name.is_some())
    }

    /// No labels at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// In name order, pair by pair, as a sorted list of pairs compares.
impl Ord for Labels {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.iter().cmp(other.iter())
    }
}

impl PartialOrd for Labels {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
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
    /// What each target (by its labels) served.
    targets: HashMap<Labels, Target>,
    /// Per series, the scrape that last wrote it (a duplicate within a scrape is refused).
    stamp: Vec<u64>,
    /// Scrapes so far.
    scrapes: u64,
    /// Series picked by a selector (its text), until a series is added or dropped: a
    /// series' labels never change, so neither does what a selector picks until then.
    selections: RefCell<HashMap<String, Arc<[usize]>>>,
}

/// One scrape target's state.
#[derive(Debug, Clone, Default)]
struct Target {
    /// The series its last scrape wrote.
    last: Vec<usize>,
    /// Its samples' series, by the sample's name and labels as it serves them (scrapes
    /// look their series up without building its labels).
    ids: HashMap<Box<[u8]>, usize>,
}

/// A sample's name and labels, as served, in one unambiguous key.
fn sample_key(key: &mut Vec<u8>, s: &inferscale_promtext::Sample<'_, '_>) {
    key.clear();
    let mut part = |b: &[u8]| {
        key.extend_from_slice(&(b.len() as u32).to_le_bytes());
        key.extend_from_slice(b);
    };
    part(s.name().as_bytes());
    for lab in s.labels() {
        part(lab.name.as_bytes());
        part(lab.value.as_bytes());
    }
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

    /// The series named `name`, by index.
    pub(crate) fn named_ids(&self, name: &str) -> &[usize] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// What `pick` returns for the selector `key`, computed once until the series change.
    pub(crate) fn selection(&self, key: String, pick: impl FnOnce() -> Vec<usize>) -> Arc<[usize]> {
        if let Some(ids) = self.selections.borrow().get(&key) {
            return ids.clone();
        }
        let ids: Arc<[usize]> = pick().into();
        self.selections.borrow_mut().insert(key, ids.clone());
        ids
    }

    fn slot(&mut self, labels: Labels) -> Result<usize, StoreError> {
        if let Some(&i) = self.index.get(&labels) {
            return Ok(i);
        }
        let Some(name) = labels.name().map(str::to_owned) else {
            return Err(StoreError::NoName { labels });
        };
        let i = self.series.len();
        self.selections.get_mut().clear();
        self.series.push(Series {
            labels: labels.clone(),
            points: Vec::new(),
        });
        self.stamp.push(0);
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
        self.scrapes += 1;
        let serial = self.scrapes;
        let mut state = self.targets.remove(target).unwrap_or_default();
        let before = std::mem::take(&mut state.last);
        let mut now = Vec::with_capacity(before.len());
        if let Some(exp) = exposition {
            let mut key = Vec::new();
            for s in exp.samples() {
                sample_key(&mut key, &s);
                let found = match state.ids.get(key.as_slice()) {
                    Some(&i) => Ok(i),
                    None => {
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
                        if let Some(n) = target.name() {
                            l.set(NAME.to_owned(), n.to_owned());
                        }
                        let found = self.slot(l);
                        if let Ok(i) = found {
                            state.ids.insert(key.as_slice().into(), i);
                        }
                        found
                    }
                };
                let at = s.timestamp().map_or(t, |ts| (ts * 1000.0).round() as i64);
                match found {
                    Ok(i) if self.stamp[i] != serial => {
                        self.stamp[i] = serial;
                        now.push(i);
                        if self.push_at(i, at, s.value()).is_ok() {
                            w.samples += 1;
                        } else {
                            w.refused += 1;
                        }
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
        for i in before {
            if self.stamp[i] != serial && self.push_at(i, t, f64::from_bits(STALE_NAN_BITS)).is_ok()
            {
                w.stale_marked += 1;
            }
        }
        state.last = now;
        self.targets.insert(target.clone(), state);
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
        self.selections.get_mut().clear();
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
        for state in self.targets.values_mut() {
            state.last.retain_mut(|i| {
                *i = map[*i];
                *i != usize::MAX
            });
            state.ids.retain(|_, i| {
                *i = map[*i];
                *i != usize::MAX
            });
        }
        let mut stamp = vec![0; self.series.len()];
        for (old, &new) in map.iter().enumerate() {
            if new != usize::MAX {
                stamp[new] = self.stamp[old];
            }
        }
        self.stamp = stamp;
        dropped
    }

    /// The target is gone (its pod was deleted): as Prometheus does when service discovery
    /// drops a target, every series it served last gets a staleness marker at `t` (ms), and
    /// no `up` sample is written. Returns how many markers were written.
    pub fn forget(&mut self, target: &Labels, t: i64) -> usize {
        let before = self.targets.remove(target).unwrap_or_default().last;
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
