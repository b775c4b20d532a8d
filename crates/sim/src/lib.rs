//! The simulated vLLM server: the [engine](inferscale_engine) behind vLLM's HTTP surface.
//!
//! - OpenAI API: `GET /v1/models`, `POST /v1/completions` and `/v1/chat/completions`,
//!   streaming (server-sent events, `stream_options.include_usage`) or not, with vLLM's
//!   validation and OpenAI-shaped errors (400 naming the field, 404 for an unknown model, 413
//!   for oversized bodies, the context-length check).
//! - `GET /health` (503 while the model loads, then 200), `GET /version`.
//! - `GET /metrics`: vLLM 0.33's exposition, values from the engine.
//! - A DCGM exporter on a second listener, readings derived from the engine's activity.
//! - Fault injection (500s, cut streams, stalls, malformed events, slow-down).
//! - An access log (JSON lines with each request's wall-clock arrival time), when asked for.
//!
//! Time runs `speedup` times faster than the wall clock; everything the server reports is in
//! simulated seconds. Each replica's engine runs on its own thread, like vLLM's engine core.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use inferscale_sim::{Sim, SimConfig};
//! let config = SimConfig::new(inferscale_engine::profile("instant").unwrap(), "demo".into());
//! let sim = Sim::start(config, 1)?;
//! let api = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! sim.serve(vec![(api, None)], async { tokio::signal::ctrl_c().await.ok(); }).await;
//! # Ok(()) }
//! ```

mod access;
mod dcgm;
mod faults;
pub mod lag;
mod metrics;
mod offline;
mod replica;
mod sampling;
mod server;
mod tokens;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

pub use access::{AccessLogError, AccessLogSummary};
pub use faults::{Fate, Faults};
pub use lag::{ClockLag, LagMeter};
pub use offline::{Exporter, FleetExporters};
pub use replica::Clock;
pub use server::HEADER_READ_TIMEOUT;
pub use tokens::{count_chat, count_text};

use inferscale_engine::kv::{MemoryError, MemoryPlan};
use inferscale_engine::{Engine, EngineConfig};
use tokio::net::TcpListener;

/// Everything that defines a simulated server.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The engine behind it.
    pub engine: EngineConfig,
    /// `--served-model-name`: what clients send as `model` and what `model_name` labels say.
    pub served_model_name: String,
    /// Simulated seconds per wall second.
    pub speedup: f64,
    /// Fault injection.
    pub faults: Faults,
    /// Also serve the metric names vLLM removed (as 0.10 did).
    pub show_deprecated_metrics: bool,
    /// Request bodies above this many bytes are refused with 413.
    pub max_body_bytes: usize,
    /// The `Hostname` label of the DCGM endpoint (`-<index>` added with several replicas).
    pub hostname: String,
    /// Where to write the access log (one JSON line per request), if anywhere.
    pub access_log: Option<PathBuf>,
    /// Require this key on `/v1/*` as vLLM's `--api-key` does (`Authorization: Bearer KEY`,
    /// else 401).
    pub api_key: Option<ApiKey>,
    /// vLLM's `--enable-auto-tool-choice` with a `--tool-call-parser`: `tool_choice: "auto"`
    /// (the default when a request gives `tools`) is served; without, it is refused with
    /// vLLM's message.
    pub auto_tool_choice: bool,
    /// Whose `/metrics` it serves: vLLM's families, or llama.cpp's (`max_num_seqs` then
    /// stands for llama-server's slots, `-np`).
    pub speaks: Speaks,
}

/// The engine whose `/metrics` a simulated server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Speaks {
    /// vLLM 0.33's families.
    #[default]
    Vllm,
    /// llama.cpp's `llama-server --metrics` families.
    LlamaCpp,
}

impl Speaks {
    /// The catalog's engine.
    pub fn engine(self) -> inferscale_catalog::Engine {
        match self {
            Speaks::Vllm => inferscale_catalog::Engine::Vllm,
            Speaks::LlamaCpp => inferscale_catalog::Engine::LlamaCpp,
        }
    }

    /// The engine's dialect, for an engine the simulator speaks (`None` for the others).
    pub fn of(engine: inferscale_catalog::Engine) -> Option<Speaks> {
        match engine {
            inferscale_catalog::Engine::Vllm => Some(Speaks::Vllm),
            inferscale_catalog::Engine::LlamaCpp => Some(Speaks::LlamaCpp),
            _ => None,
        }
    }
}

/// A server's API key. `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key; surrounding whitespace (a file's final newline) is dropped. `None` when empty.
    pub fn new(key: &str) -> Option<ApiKey> {
        let k = key.trim();
        (!k.is_empty()).then(|| ApiKey(k.to_owned()))
    }

    /// Whether an `Authorization` header value carries this key, compared in constant time
    /// (a timing difference must not reveal how much of a guess was right).
    pub fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        let want = format!("Bearer {}", self.0);
        let got = authorization.unwrap_or_default();
        let mut diff = u8::from(got.len() != want.len());
        for (i, b) in want.bytes().enumerate() {
            diff |= b ^ got.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl SimConfig {
    /// A configuration with defaults around an engine.
    pub fn new(engine: EngineConfig, served_model_name: String) -> Self {
        SimConfig {
            engine,
            served_model_name,
            speedup: 1.0,
            faults: Faults::default(),
            show_deprecated_metrics: false,
            max_body_bytes: 4 << 20,
            hostname: "inferscale-sim".into(),
            access_log: None,
            api_key: None,
            auto_tool_choice: false,
            speaks: Speaks::Vllm,
        }
    }
}

/// Started engines, ready to be served.
pub struct Sim {
    replicas: Vec<Arc<server::Replica>>,
    plan: MemoryPlan,
    load_time: f64,
    access: Option<Arc<access::AccessLog>>,
    lag: LagMeter,
}

impl Sim {
    /// Starts `replicas` engines (each on its own thread; their clocks start now), or says why
    /// the configuration cannot run.
    pub fn start(mut config: SimConfig, replicas: usize) -> Result<Sim, SimError> {
        if let Some(slow) = config.faults.slowdown {
            config.engine.slowdown = Some(slow);
        }
        let cfg = Arc::new(config);
        let mut out = Vec::new();
        let mut plan = None;
        let load_time = cfg.engine.load_time_s();
        let access = match &cfg.access_log {
            None => None,
            Some(p) => Some(Arc::new(access::AccessLog::create(p).map_err(
                |source| AccessLogError::Create {
                    path: p.clone(),
                    source,
                },
            )?)),
        };
        let lag = LagMeter::default();
        for i in 0..replicas.max(1) {
            let mut ec = cfg.engine.clone();
            ec.seed = inferscale_engine::mix(&[cfg.engine.seed, i as u64]);
            let engine = Engine::new(ec).map_err(SimError::Memory)?;
            plan.get_or_insert(*engine.memory());
            let clock = Clock::new(cfg.speedup);
            let handle =
                replica::EngineHandle::spawn(engine, clock, format!("engine-{i}"), lag.clone())
                    .map_err(SimError::Thread)?;
            out.push(Arc::new(server::Replica::new(
                i,
                Arc::clone(&cfg),
                handle,
                clock,
                load_time,
                access.clone(),
                replicas.max(1),
            )));
        }
        let plan = plan.ok_or(SimError::NoReplica)?;
        Ok(Sim {
            replicas: out,
            plan,
            load_time,
            access,
            lag,
        })
    }

    /// How late the engine threads have released what they computed, across every replica:
    /// keep the handle before [`Sim::serve`] consumes the simulator, and read it after a run
    /// to know whether the machine held the speed-up.
    pub fn lag_meter(&self) -> LagMeter {
        self.lag.clone()
    }

    /// The KV-cache layout of each replica.
    pub fn memory(&self) -> &MemoryPlan {
        &self.plan
    }

    /// Simulated seconds from start until ready.
    pub fn load_time_s(&self) -> f64 {
        self.load_time
    }

    /// Serves replica `i` on `listeners[i].0` (API) and, when given, `listeners[i].1` (DCGM)
    /// until `shutdown` resolves; in-flight connections are closed gracefully. Returns the
    /// access log's closing line (how many requests it holds, or why it may be incomplete)
    /// when one was kept.
    pub async fn serve(
        self,
        listeners: Vec<(TcpListener, Option<TcpListener>)>,
        shutdown: impl Future<Output = ()>,
    ) -> Option<Result<AccessLogSummary, AccessLogError>> {
        let set = self
            .replicas
            .into_iter()
            .zip(listeners)
            .map(|(r, (api, dcgm))| (r, api, dcgm))
            .collect();
        server::serve_all(set, shutdown).await;
        self.access.map(|a| a.close())
    }
}

/// Binds a listener the way uvicorn (vLLM's HTTP server) does: address reuse and a backlog
/// of 2048 pending connections, so that a burst of new connections from a load generator
/// waits in the queue instead of having its SYNs dropped (and retried a second later).
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(2048)
}

/// Why a simulator could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The model does not fit the GPU as configured.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// An engine thread could not be started.
    #[error("cannot start an engine thread")]
    Thread(#[source] std::io::Error),
    /// Zero replicas.
    #[error("no replica to serve")]
    NoReplica,
    /// The access log could not be created.
    #[error(transparent)]
    AccessLog(#[from] AccessLogError),
}
