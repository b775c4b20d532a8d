//! Shared helpers: a simulator on loopback and a load configuration against it.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use inferscale_loadgen::prompt::{Api, Length, PromptSource, RequestSpec};
use inferscale_loadgen::report::RunReport;
use inferscale_loadgen::schedule::{Arrival, Stage};
use inferscale_loadgen::transport::ClientConfig;
use inferscale_loadgen::{LoadConfig, Target};
use inferscale_sim::{LagMeter, Sim, SimConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub(crate) struct Running {
    pub(crate) api: SocketAddr,
    /// How late the simulator released what its engine computed.
    pub(crate) lag: LagMeter,
    _stop: oneshot::Sender<()>,
}

impl Running {
    /// Fails the test, saying plainly that the machine (not the code) fell short, when the
    /// client did not keep the schedule in some step or the simulator did not keep its clock.
    /// Call it before asserting on timing, so that a starved machine is named as the cause
    /// instead of surfacing as a wrong number.
    pub(crate) fn assert_held(&self, report: &RunReport, speedup: f64) {
        for st in &report.steps {
            assert!(
                !st.client.client_limited,
                "the client could not keep the schedule in step {} ({} req/s): {}; \
                 this machine is too slow (or too busy) for the test's {speedup}× speed-up, \
                 which is not a fault in the code",
                st.index,
                st.target_rps,
                st.client.reason.as_deref().unwrap_or("client-limited")
            );
        }
        let lag = self.lag.read();
        assert!(
            lag.held(),
            "the simulator could not keep its clock: {}; this machine is too slow (or too \
             busy) for the test's {speedup}× speed-up, which is not a fault in the code",
            lag.describe()
        );
    }
}

pub(crate) async fn start(cfg: SimConfig) -> Running {
    let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = api.local_addr().unwrap();
    let sim = Sim::start(cfg, 1).unwrap();
    let lag = sim.lag_meter();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(sim.serve(vec![(api, None)], async {
        let _ = rx.await;
    }));
    // Wait for /health (the model "loads" in simulated time).
    let t = Target::parse(&format!("http://{addr}/health")).unwrap();
    inferscale_loadgen::transport::wait_ready(
        &t,
        &inferscale_loadgen::transport::Get::new("*/*"),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    Running {
        api: addr,
        lag,
        _stop: tx,
    }
}

pub(crate) fn eks(speedup: f64) -> SimConfig {
    let mut c = SimConfig::new(
        inferscale_engine::profile("aws-eks-ministral-8b-l40s").unwrap(),
        "m".into(),
    );
    c.speedup = speedup;
    c
}

pub(crate) fn load(api: SocketAddr, stages: Vec<Stage>, speedup: f64, stream: bool) -> LoadConfig {
    let url = Target::parse(&format!("http://{api}")).unwrap();
    LoadConfig {
        client: ClientConfig {
            target: url.clone(),
            reuse: true,
            timeout: Duration::from_secs(60),
            max_body: 16 << 20,
            auth: inferscale_loadgen::Auth::none(),
            tls: None,
        },
        requests: RequestSpec {
            api: Api::Completions,
            model: "m".into(),
            prompt: PromptSource::Seeds,
            max_tokens: Length::Fixed { tokens: 100 },
            temperature: 0.7,
            stream,
            ignore_eos: false,
        },
        stages,
        arrival: Arrival::Constant,
        max_in_flight: 500,
        speedup,
        seed: 1,
        metrics: Some(url.with_path("/metrics")),
        sample_interval_s: 1.0,
        grace: Duration::from_secs(5),
        segment: inferscale_loadgen::schedule::Segment::WHOLE,
        start_at: None,
        probe_rate_rps: None,
    }
}
