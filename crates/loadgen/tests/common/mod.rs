//! Shared helpers: a simulator on loopback and a load configuration against it.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use inferscale_loadgen::prompt::{Api, Length, PromptSource, RequestSpec};
use inferscale_loadgen::schedule::{Arrival, Stage};
use inferscale_loadgen::transport::ClientConfig;
use inferscale_loadgen::{LoadConfig, Target};
use inferscale_sim::{Sim, SimConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub(crate) struct Running {
    pub(crate) api: SocketAddr,
    _stop: oneshot::Sender<()>,
}

pub(crate) async fn start(cfg: SimConfig) -> Running {
    let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = api.local_addr().unwrap();
    let sim = Sim::start(cfg, 1).unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(sim.serve(vec![(api, None)], async {
        let _ = rx.await;
    }));
    // Wait for /health (the model "loads" in simulated time).
    let t = Target::parse(&format!("http://{addr}/health")).unwrap();
    for _ in 0..2000 {
        if inferscale_loadgen::transport::get_once(&t, "*/*", Duration::from_secs(1), 1 << 20)
            .await
            .is_ok_and(|r| r.0 == 200)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Running {
        api: addr,
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
    }
}
