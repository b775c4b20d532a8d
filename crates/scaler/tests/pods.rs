//! The scaler's reading of real HTTP pods: values from those that answer, failures named,
//! and an error (never a 0) when none answers.

use std::collections::BTreeMap;
use std::time::Duration;

use inferscale_scaler::scrape::Pods;
use inferscale_scaler::{Config, NoValue, answer};

mod common;
use common::pod;

fn config(urls: &[String]) -> Config {
    let meta: BTreeMap<String, String> = [
        ("targets", urls.join(",")),
        ("metric", "queue_depth".into()),
        ("target", "5".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    Config::from_metadata(&meta, "default").unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_sums_the_pods_that_answer_and_none_answering_is_an_error() {
    let (a, ta) = pod(Some(3.0)).await;
    let (b, tb) = pod(Some(4.0)).await;
    let (c, tc) = pod(Some(5.0)).await;
    let urls = vec![a.clone(), b.clone(), c.clone()];
    let cfg = config(&urls);
    // No cache: every read scrapes.
    let pods = Pods::new(Duration::from_secs(2), Duration::ZERO);
    let got = answer(&cfg, pods.read(&urls, cfg.window_s).await).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((got.value, got.pods_ok, got.failures.len()), (12.0, 3, 0));

    tb.abort();
    let _ = tb.await;
    let got = answer(&cfg, pods.read(&urls, cfg.window_s).await).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((got.value, got.pods_ok), (8.0, 2));
    assert_eq!(got.failures.len(), 1);
    assert!(got.failures[0].starts_with(&b), "{:?}", got.failures);

    ta.abort();
    tc.abort();
    let _ = (ta.await, tc.await);
    match answer(&cfg, pods.read(&urls, cfg.window_s).await) {
        Err(NoValue::AllFailed { failed: 3, first }) => assert!(first.starts_with(&a), "{first}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        answer(&cfg, pods.read(&[], cfg.window_s).await),
        Err(NoValue::NoPods)
    );
}

// In virtual time (tokio's paused clock, behind inferscale_clock): the 2 s timeout and the
// 60 s cache pass in no time at all, and exactly.
#[tokio::test(start_paused = true)]
async fn a_pod_that_hangs_times_out_and_answers_are_cached_briefly() {
    let (a, ta) = pod(Some(2.0)).await;
    let (slow, _ts) = pod(None).await;
    let urls = vec![a.clone(), slow.clone()];
    let cfg = config(&urls);
    let pods = Pods::new(Duration::from_secs(2), Duration::from_secs(60));
    let got = answer(&cfg, pods.read(&urls, cfg.window_s).await).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((got.value, got.pods_ok), (2.0, 1));
    assert!(
        got.failures[0].starts_with(&slow) && got.failures[0].contains("timed out"),
        "{:?}",
        got.failures
    );
    // Within the cache's life the same answer comes back without scraping: the pod that
    // answered is gone now, and a scrape would find no pod at all.
    ta.abort();
    let _ = ta.await;
    assert_eq!(
        answer(&cfg, pods.read(&urls, cfg.window_s).await),
        Ok(got.clone())
    );
    // A different set of pods is not served from the cache.
    assert!(matches!(
        answer(&cfg, pods.read(&urls[..1], cfg.window_s).await),
        Err(NoValue::AllFailed { failed: 1, .. })
    ));
    // Just before the cache's life ends the answer still stands; past it, the pods are read
    // again: one refuses, the other hangs for the whole timeout.
    let t0 = inferscale_clock::now();
    tokio::time::sleep(Duration::from_secs(55)).await;
    assert_eq!(answer(&cfg, pods.read(&urls, cfg.window_s).await), Ok(got));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let read = inferscale_clock::now();
    assert!(matches!(
        answer(&cfg, pods.read(&urls, cfg.window_s).await),
        Err(NoValue::AllFailed { failed: 2, .. })
    ));
    // Virtual seconds, to the timer wheel's millisecond.
    let near = |d: Duration, s: f64| (d.as_secs_f64() - s).abs() < 0.005;
    assert!(near(read - t0, 65.0), "{:?}", read - t0);
    assert!(
        near(inferscale_clock::now() - read, 2.0),
        "{:?}",
        inferscale_clock::now() - read
    );
}
