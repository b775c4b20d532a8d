//! The merge is exact: histograms of a run's parts, encoded as `run.json` carries them,
//! decoded and added, give the same percentiles as one histogram of all the records.

#![allow(clippy::unwrap_used)]

use inferscale_workload::record::Hdr;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn merge_of_split_records_is_the_histogram_of_the_records(
        // Latencies from 1 µs to about 17 minutes, spread over many magnitudes.
        exps in prop::collection::vec((0.0f64..9.0, 1.0f64..10.0), 0..400),
        parts in 1usize..9,
        owner in prop::collection::vec(0usize..64, 400),
    ) {
        let values: Vec<f64> = exps.iter().map(|(e, m)| m * 10f64.powf(*e) * 1e-6).collect();
        let mut whole = Hdr::default();
        let mut split: Vec<Hdr> = (0..parts).map(|_| Hdr::default()).collect();
        for (i, v) in values.iter().enumerate() {
            whole.record(*v);
            split[owner[i] % parts].record(*v);
        }
        let mut merged = Hdr::default();
        for part in &split {
            merged.add(&Hdr::decode(&part.encode()).unwrap());
        }
        prop_assert_eq!(merged.len(), whole.len());
        prop_assert_eq!(merged.percentiles(), whole.percentiles());
        for q in [0.0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            prop_assert_eq!(merged.quantile(q), whole.quantile(q));
        }
    }
}
