//! Frames of the monitor, drawn with ratatui's `TestBackend` and snapshot: a healthy fleet,
//! a saturated one (HighQueueDepth pending, then firing) and a replica that went away and
//! came back. The replicas are the simulator's engine driven in virtual time, their
//! expositions fed to the monitor's own store every 5 s as its scrapes would be; the rules
//! are the ones `inferscale generate` writes for the default run.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use inferscale_analysis::Thresholds;
use inferscale_autoscale::alerts::read_rules;
use inferscale_engine::fleet::{Fleet, Routing, drive};
use inferscale_engine::{EngineConfig, RequestSpec, profile};
use inferscale_http::transport::Get;
use inferscale_monitor::app::render_text;
use inferscale_monitor::dashboard::Dashboard;
use inferscale_monitor::signals::Scope;
use inferscale_monitor::source::{Kind, PodTarget};
use inferscale_monitor::ui::{Screen, View};
use inferscale_monitor::{Config, Monitor, SourceSpec};
use inferscale_promql::Labels;
use inferscale_sim::Exporter;

const MODEL: &str = "mistralai/Ministral-3-8B-Instruct-2512";
/// 2023-11-14T22:13:20Z: a fixed clock, so the frames' times do not change.
const EPOCH: f64 = 1_700_000_000.0;
const SCRAPE_S: f64 = 5.0;

/// One simulated replica and its two exporters.
struct Replica {
    fleet: Fleet,
    exporter: Exporter,
    sent: u64,
}

impl Replica {
    fn new(cfg: &EngineConfig, id: usize) -> Replica {
        let mut fleet = Fleet::new(cfg.clone(), 1, Routing::RoundRobin).unwrap();
        fleet.set_token_events(false);
        Replica {
            fleet,
            exporter: Exporter::new(cfg, MODEL, EPOCH, id),
            sent: 0,
        }
    }

    /// Runs from `a` to `b` (seconds from the start) at `rate` req/s.
    fn run(&mut self, a: f64, b: f64, rate: f64) {
        let mut arrivals = Vec::new();
        if rate > 0.0 {
            // Arrivals half an interval off the scrapes, so none lands exactly on one.
            let mut k = (a * rate - 0.5).floor().max(-1.0) as i64 + 1;
            while (k as f64 + 0.5) / rate <= a {
                k += 1;
            }
            while (k as f64 + 0.5) / rate <= b {
                let n = self.sent + arrivals.len() as u64;
                arrivals.push((
                    (k as f64 + 0.5) / rate,
                    RequestSpec {
                        prompt_tokens: 40 + (n % 31) as u32,
                        max_tokens: 100,
                        ignore_eos: true,
                    },
                ));
                k += 1;
            }
        }
        self.sent += arrivals.len() as u64;
        drive(&mut self.fleet, arrivals, b, &mut [], |_| {});
    }
}

struct Rig {
    replicas: Vec<Replica>,
    monitor: Monitor,
    t: f64,
    /// Replicas whose scrapes fail.
    down: Vec<bool>,
}

fn thresholds() -> Thresholds {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/runs/thresholds-default.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

impl Rig {
    fn new(n: usize) -> Rig {
        let cfg = profile("aws-eks-ministral-8b-l40s").unwrap();
        let options = inferscale_manifests::Options::example();
        let rules = inferscale_manifests::rules::Rules::new(&thresholds(), &options);
        let rules = read_rules(&rules.rule_file().to_yaml().unwrap())
            .unwrap()
            .rules;
        let mut targets = Vec::new();
        for i in 0..n {
            targets.push(PodTarget {
                url: format!("http://10.0.0.{}:8000/metrics", i + 1),
                labels: Labels::new([
                    ("job", "vllm".to_owned()),
                    ("namespace", "llm".to_owned()),
                    ("pod", format!("vllm-{i}")),
                    ("instance", format!("10.0.0.{}:8000", i + 1)),
                ]),
                kind: Kind::Engine,
            });
        }
        for i in 0..n {
            targets.push(PodTarget {
                url: format!("http://10.0.1.{}:9400/metrics", i + 1),
                labels: Labels::new([
                    ("job", "dcgm-exporter".to_owned()),
                    ("instance", format!("10.0.1.{}:9400", i + 1)),
                ]),
                kind: Kind::Gpu,
            });
        }
        let monitor = Monitor::new(Config {
            source: SourceSpec::Pods {
                targets,
                access: Get::new("*/*"),
            },
            rules,
            scope: Scope {
                server: inferscale_catalog::Engine::Vllm,
                engine: "namespace=\"llm\"".into(),
                up: "namespace=\"llm\",job=\"vllm\"".into(),
                gpu: String::new(),
                window: "1m".into(),
                replica_label: "pod".into(),
            },
            history: 60,
            follow: None,
        })
        .unwrap();
        Rig {
            replicas: (0..n).map(|i| Replica::new(&cfg, i)).collect(),
            monitor,
            t: 0.0,
            down: vec![false; n],
        }
    }

    /// Runs every replica at `rate` req/s for `secs`, scraping and evaluating every 5 s.
    fn run(&mut self, secs: f64, rate: f64) -> Dashboard {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let end = self.t + secs;
        let mut last = None;
        while self.t < end {
            let (a, b) = (self.t, self.t + SCRAPE_S);
            let n = self.replicas.len();
            for (i, r) in self.replicas.iter_mut().enumerate() {
                r.run(a, b, rate);
                let engine = &r.fleet.replicas()[0].engine;
                let now = EPOCH + b;
                let pods = self.monitor.pods_mut().unwrap();
                if self.down[i] {
                    let e = std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        format!(
                            "cannot connect to 10.0.0.{}:8000: Connection refused",
                            i + 1
                        ),
                    );
                    pods.ingest(i, now, Err(&e));
                    pods.ingest(n + i, now, Err(&e));
                    continue;
                }
                let vllm = r.exporter.vllm(engine);
                let dcgm = r.exporter.dcgm(engine, b);
                let exp = inferscale_promtext::parse(vllm.as_bytes()).unwrap();
                pods.ingest(i, now, Ok(&exp));
                let exp = inferscale_promtext::parse(dcgm.as_bytes()).unwrap();
                pods.ingest(n + i, now, Ok(&exp));
            }
            self.t = b;
            last = Some(rt.block_on(self.monitor.evaluate(EPOCH + b)));
        }
        last.unwrap()
    }

    fn frame(&self, d: &Dashboard, view: View) -> String {
        render_text(
            d,
            self.monitor.history(),
            Screen {
                view,
                paused: false,
            },
            120,
        )
    }
}

fn state<'a>(d: &'a Dashboard, alert: &str) -> &'a str {
    d.alerts.iter().find(|a| a.name == alert).unwrap().state
}

#[test]
fn a_healthy_fleet() {
    let mut rig = Rig::new(2);
    let d = rig.run(120.0, 20.0);
    // 20 req/s each, well under the ~56 one replica sustains: nothing waits, nothing fires.
    assert_eq!(d.service.queue, Some(0.0));
    let rps = d.service.rps.unwrap();
    assert!((38.0..42.0).contains(&rps), "{rps}");
    assert!(
        d.alerts.iter().all(|a| a.state == "inactive"),
        "{:?}",
        d.alerts
    );
    assert_eq!(d.gpus.len(), 2);
    insta::assert_snapshot!("healthy", rig.frame(&d, View::Overview));
}

#[test]
fn a_saturated_fleet_turns_high_queue_depth_pending_then_firing() {
    let mut rig = Rig::new(2);
    rig.run(60.0, 20.0);
    // 70 req/s each: more than a replica sustains, so each one's queue grows past 54 (twice
    // the measured scale-out threshold of 27).
    let d = rig.run(60.0, 70.0);
    assert_eq!(state(&d, "HighQueueDepth"), "pending");
    let a = d
        .alerts
        .iter()
        .find(|a| a.name == "HighQueueDepth")
        .unwrap();
    assert_eq!(a.instances.len(), 2, "one instance per pod");
    let left = a.instances[0].fires_in_s.unwrap();
    assert!(left > 0.0 && left < 120.0, "{left}");
    insta::assert_snapshot!("saturated-pending", rig.frame(&d, View::Overview));
    let d = rig.run(90.0, 70.0);
    assert_eq!(state(&d, "HighQueueDepth"), "firing");
    insta::assert_snapshot!("saturated-firing", rig.frame(&d, View::Overview));
    insta::assert_snapshot!("saturated-alerts-view", rig.frame(&d, View::Alerts));
}

#[test]
fn a_target_that_went_away_is_shown_down_and_comes_back() {
    let mut rig = Rig::new(2);
    rig.run(60.0, 20.0);
    rig.down[1] = true;
    let d = rig.run(30.0, 20.0);
    let gone = d.replicas.iter().find(|r| r.name == "vllm-1").unwrap();
    assert_eq!(gone.up, Some(false));
    assert_eq!(gone.queue, None, "its series went stale: missing, not 0");
    assert_eq!(d.gpus.len(), 1);
    insta::assert_snapshot!("target-down", rig.frame(&d, View::Overview));
    insta::assert_snapshot!("target-down-replicas-view", rig.frame(&d, View::Replicas));
    rig.down[1] = false;
    let d = rig.run(10.0, 20.0);
    let back = d.replicas.iter().find(|r| r.name == "vllm-1").unwrap();
    assert_eq!(back.up, Some(true));
    assert_eq!(back.queue, Some(0.0));
}
