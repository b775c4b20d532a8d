//! The HTTP side: vLLM's OpenAI-compatible routes, `/metrics`, `/health`, `/version`, and the
//! DCGM exporter's `/metrics` on its own listener.

use inferscale_clock::Instant;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use inferscale_engine::kv::BLOCK_SIZE;
use inferscale_engine::stats::FinishReason;
use inferscale_engine::{PromptBlocks, RequestSpec};
use inferscale_openai::{
    AssistantMessage, ChatChoice, ChatCompletion, Completion, CompletionChoice, ErrorBody,
    FunctionCall, ModelCard, ModelList, ToolCall, Usage,
};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::SimConfig;
use crate::access::{AccessLog, Entry};
use crate::dcgm::DcgmState;
use crate::metrics::{self, HttpStats, ProcessInfo};
use crate::replica::{Clock, EngineHandle, Update};
use crate::sampling::{self, Plan, Sampling};
use crate::tokens::{PromptText, block_hashes, count_chat, count_text, fingerprint, token_ids};

/// The response body type: whole bodies and token streams alike.
pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

/// One replica's shared state.
pub(crate) struct Replica {
    pub(crate) index: usize,
    pub(crate) cfg: Arc<SimConfig>,
    pub(crate) engine: EngineHandle,
    pub(crate) clock: Clock,
    pub(crate) load_time: f64,
    pub(crate) created_unix: f64,
    pub(crate) access: Option<Arc<AccessLog>>,
    /// The DCGM endpoint's `Hostname`: each replica is a GPU node of its own, so with
    /// several replicas each gets `-<index>` (a fleet's GPUs are told apart by host, as the
    /// generated GPUMemoryCritical alert and the monitor's GPU rows group them).
    pub(crate) hostname: String,
    keys: AtomicU64,
    http: Mutex<HttpStats>,
    dcgm: Mutex<DcgmState>,
}

impl Replica {
    pub(crate) fn new(
        index: usize,
        cfg: Arc<SimConfig>,
        engine: EngineHandle,
        clock: Clock,
        load_time: f64,
        access: Option<Arc<AccessLog>>,
        replicas: usize,
    ) -> Self {
        let created_unix = inferscale_clock::unix_seconds();
        let hostname = if replicas > 1 {
            format!("{}-{index}", cfg.hostname)
        } else {
            cfg.hostname.clone()
        };
        Replica {
            hostname,
            index,
            cfg,
            engine,
            clock,
            load_time,
            created_unix,
            access,
            keys: AtomicU64::new(0),
            http: Mutex::new(HttpStats::default()),
            dcgm: Mutex::new(DcgmState::default()),
        }
    }

    fn ready(&self) -> bool {
        self.clock.now() >= self.load_time
    }
}

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json(status: StatusCode, v: &impl serde::Serialize) -> Response<Body> {
    full(
        status,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    )
}

fn error(status: StatusCode, message: impl Into<String>, param: Option<&str>) -> Response<Body> {
    let kind = match status {
        StatusCode::BAD_REQUEST => "BadRequestError",
        StatusCode::NOT_FOUND => "NotFoundError",
        StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
        StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailableError",
        _ => "InternalServerError",
    };
    json(
        status,
        &ErrorBody::new(status.as_u16(), kind, message, param),
    )
}

/// Serves `listener` until `shutdown` changes; `dcgm` selects the DCGM exporter's routes.
pub(crate) async fn serve_listener(
    listener: TcpListener,
    replica: Arc<Replica>,
    dcgm: bool,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let Ok((stream, closed, watcher)) = watch_disconnect(stream) else {
            continue;
        };
        let replica = Arc::clone(&replica);
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            let _watcher = AbortOnDrop(watcher);
            let svc = service_fn(move |req| {
                let replica = Arc::clone(&replica);
                let mut closed = closed.clone();
                async move {
                    // A client that hangs up ends its request, as vLLM aborts on disconnect
                    // (hyper alone would only notice when it next writes).
                    let resp = tokio::select! {
                        r = route(req, replica, dcgm) => r,
                        _ = closed.wait_for(|c| *c) => error(StatusCode::BAD_REQUEST, "the client disconnected", None),
                    };
                    Ok::<_, Infallible>(resp)
                }
            });
            let stopped = async move { drop(stop.changed().await) };
            inferscale_http::server::serve_connection(stream, svc, stopped).await;
        });
    }
}

pub use inferscale_http::server::HEADER_READ_TIMEOUT;

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Splits a connection into the stream hyper serves and a watch that turns true when the
/// client closes its side. A duplicate of the socket is peeked (never read) for end-of-file;
/// pending bytes (a next keep-alive request) are left for hyper.
fn watch_disconnect(
    stream: TcpStream,
) -> std::io::Result<(TcpStream, watch::Receiver<bool>, tokio::task::AbortHandle)> {
    let std = stream.into_std()?;
    let dup = std.try_clone()?;
    let stream = TcpStream::from_std(std)?;
    let dup = TcpStream::from_std(dup)?;
    let (tx, rx) = watch::channel(false);
    let watcher = tokio::spawn(async move {
        let mut b = [0u8; 1];
        loop {
            match dup.peek(&mut b).await {
                Ok(0) | Err(_) => break,
                Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
        let _ = tx.send(true);
        // Keep the duplicate open until the connection task ends (it aborts this task), so
        // the socket closes when hyper is done with it, not before.
        std::future::pending::<()>().await;
    });
    Ok((stream, rx, watcher.abort_handle()))
}

async fn route(req: Request<Incoming>, r: Arc<Replica>, dcgm: bool) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    if dcgm {
        return match (method, path.as_str()) {
            (Method::GET, "/metrics") => dcgm_metrics(&r).await,
            _ => error(
                StatusCode::NOT_FOUND,
                format!("no route {path} (the DCGM endpoint serves /metrics)"),
                None,
            ),
        };
    }
    // vLLM's --api-key guards /v1/* only (health and metrics stay open for probes and
    // Prometheus), and answers exactly this.
    if let Some(key) = &r.cfg.api_key
        && path.starts_with("/v1")
        && !key.accepts(
            req.headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
        )
    {
        return json(
            StatusCode::UNAUTHORIZED,
            &serde_json::json!({ "error": "Unauthorized" }),
        );
    }
    let started = Instant::now();
    let arrival_unix_s = r.access.as_ref().map(|_| inferscale_clock::unix_seconds());
    let req_bytes = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    let (resp, handler) = match (&method, path.as_str()) {
        (&Method::GET, "/health") => (health(&r), None),
        (&Method::GET, "/ping") | (&Method::POST, "/ping") => (health(&r), None),
        (&Method::GET, "/version") => (
            json(StatusCode::OK, &serde_json::json!({ "version": "0.33.0" })),
            None,
        ),
        (&Method::GET, "/metrics") => (vllm_metrics(&r).await, None),
        (&Method::GET, "/v1/models") => (models(&r), Some("/v1/models")),
        (&Method::POST, "/v1/completions") => {
            (generate(req, &r, false).await, Some("/v1/completions"))
        }
        (&Method::POST, "/v1/chat/completions") => {
            (generate(req, &r, true).await, Some("/v1/chat/completions"))
        }
        (
            _,
            "/v1/completions"
            | "/v1/chat/completions"
            | "/v1/models"
            | "/health"
            | "/metrics"
            | "/version",
        ) => (
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("method {method} is not allowed on {path}"),
                None,
            ),
            None,
        ),
        _ => (
            error(StatusCode::NOT_FOUND, format!("no route {path}"), None),
            None,
        ),
    };
    if let Some(h) = handler {
        let resp_bytes = hyper::body::Body::size_hint(resp.body())
            .exact()
            .unwrap_or(0) as f64;
        let seconds = started.elapsed().as_secs_f64() * r.clock.speedup();
        if let Ok(mut s) = r.http.lock() {
            s.record(
                h,
                method.as_str(),
                resp.status().as_u16(),
                req_bytes,
                resp_bytes,
                seconds,
            );
        }
    }
    if let (Some(log), Some(arrival_unix_s)) = (&r.access, arrival_unix_s) {
        log.log(&Entry {
            arrival_unix_s,
            replica: r.index,
            method: method.as_str(),
            path: &path,
            status: resp.status().as_u16(),
            ready_s: started.elapsed().as_secs_f64(),
        });
    }
    resp
}

fn health(r: &Replica) -> Response<Body> {
    if r.ready() {
        full(StatusCode::OK, "application/json", Bytes::new())
    } else {
        let left = r.load_time - r.clock.now();
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the model is loading ({left:.0} simulated seconds left)"),
            None,
        )
    }
}

fn models(r: &Replica) -> Response<Body> {
    json(
        StatusCode::OK,
        &ModelList {
            object: "list".into(),
            data: vec![ModelCard {
                id: r.cfg.served_model_name.clone(),
                object: "model".into(),
                created: Some(r.created_unix as u64),
                owned_by: "vllm".into(),
                root: Some(r.cfg.engine.model.hf_id.clone()),
                max_model_len: Some(u64::from(r.cfg.engine.max_model_len)),
            }],
        },
    )
}

async fn vllm_metrics(r: &Replica) -> Response<Body> {
    let Some(snap) = r.engine.snapshot().await else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the engine stopped",
            None,
        );
    };
    let http = r.http.lock().map(|h| h.clone()).unwrap_or_default();
    let ctx = metrics::Context {
        model_name: &r.cfg.served_model_name,
        created: r.created_unix,
        gpu_memory_utilization: r.cfg.engine.gpu_memory_utilization,
        prefix_caching: r.cfg.engine.prefix_caching,
        cache_dtype: if r.cfg.engine.kv_dtype_bytes < 2.0 {
            "fp8"
        } else {
            "auto"
        },
        show_deprecated: r.cfg.show_deprecated_metrics,
        process: ProcessInfo::current(r.created_unix),
    };
    let body = match r.cfg.speaks {
        crate::Speaks::Vllm => metrics::render(&snap.stats, &ctx, &http),
        crate::Speaks::LlamaCpp => inferscale_promtext::write(
            &metrics::llamacpp_exposition(&snap.stats, &|_| true),
            inferscale_promtext::WriteOptions::new(inferscale_promtext::Format::PrometheusText),
        ),
    };
    full(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        body,
    )
}

async fn dcgm_metrics(r: &Replica) -> Response<Body> {
    let Some(snap) = r.engine.snapshot().await else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the engine stopped",
            None,
        );
    };
    let body = match r.dcgm.lock() {
        Ok(mut d) => {
            d.collect(&snap, &r.cfg.engine.gpu);
            d.render(&r.cfg.engine, &r.hostname, r.cfg.engine.seed, r.index)
        }
        Err(_) => String::new(),
    };
    full(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        body,
    )
}

/// A validated generation request.
#[derive(Debug)]
struct Generation {
    prompt_tokens: u32,
    prompt_fingerprint: u64,
    max_tokens: u32,
    stream: bool,
    include_usage: bool,
    ignore_eos: bool,
    /// `n`, `stop`, `logprobs`, tools.
    sampling: Sampling,
    /// The prompt's full blocks, for the prefix cache.
    blocks: PromptBlocks,
    /// The conversation's last message is a tool's result.
    last_is_tool: bool,
}

type Invalid = Box<Response<Body>>;

fn bad(message: impl Into<String>, param: &str) -> Invalid {
    Box::new(error(StatusCode::BAD_REQUEST, message, Some(param)))
}

fn get_bool(v: &Value, field: &str) -> Result<Option<bool>, Invalid> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(bad(
            format!("`{field}` must be a boolean, not {other}"),
            field,
        )),
    }
}

/// Checks a request body the way vLLM's OpenAI server does (the subset the simulator acts on;
/// other sampling fields are accepted and ignored).
// Long: one request field after another, checked as vLLM's protocol model checks it, in its
// declaration order.
fn validate(body: &Value, chat: bool, r: &Replica) -> Result<Generation, Invalid> {
    let obj = body
        .as_object()
        .ok_or_else(|| bad("the request body must be a JSON object", "body"))?;
    if let Some(model) = obj.get("model").filter(|m| !m.is_null()) {
        let name = model
            .as_str()
            .ok_or_else(|| bad("`model` must be a string", "model"))?;
        if name != r.cfg.served_model_name {
            return Err(Box::new(error(
                StatusCode::NOT_FOUND,
                format!(
                    "The model `{name}` does not exist. Available: `{}`.",
                    r.cfg.served_model_name
                ),
                Some("model"),
            )));
        }
    }
    let (prompt_tokens, prompt_fingerprint, prompt_ids, last_is_tool) = if chat {
        let msgs = obj
            .get("messages")
            .and_then(Value::as_array)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                bad(
                    "`messages` must be a non-empty array of {role, content} objects",
                    "messages",
                )
            })?;
        let mut contents = Vec::with_capacity(msgs.len());
        let mut roles = Vec::with_capacity(msgs.len());
        for (i, m) in msgs.iter().enumerate() {
            let Some(role) = m.get("role").and_then(Value::as_str) else {
                return Err(bad(
                    format!("`messages[{i}].role` must be a string"),
                    "messages",
                ));
            };
            roles.push(role.to_owned());
            let content = match m.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => {
                    // vLLM validates each part against the content-part types: an object
                    // with a string `type`; a `text` part carries a string `text`.
                    let mut texts = Vec::new();
                    for (j, p) in parts.iter().enumerate() {
                        let Some(kind) = p.get("type").and_then(Value::as_str) else {
                            return Err(bad(
                                format!(
                                    "`messages[{i}].content[{j}]` must be a content part object with a string `type`"
                                ),
                                "messages",
                            ));
                        };
                        if kind == "text" {
                            let Some(t) = p.get("text").and_then(Value::as_str) else {
                                return Err(bad(
                                    format!("`messages[{i}].content[{j}].text` must be a string"),
                                    "messages",
                                ));
                            };
                            texts.push(t);
                        }
                    }
                    texts.join(" ")
                }
                Some(Value::Null) | None => String::new(),
                Some(_) => {
                    return Err(bad(
                        format!("`messages[{i}].content` must be a string or an array of parts"),
                        "messages",
                    ));
                }
            };
            contents.push(content);
        }
        let joined = contents.join("\n");
        let last_is_tool = roles.last().is_some_and(|r| r == "tool");
        let pairs: Vec<(String, String)> =
            roles.into_iter().zip(contents.iter().cloned()).collect();
        (
            count_chat(contents.iter().map(String::as_str)),
            fingerprint(&joined),
            token_ids(&PromptText::Chat(&pairs)),
            last_is_tool,
        )
    } else {
        let text = |s: &str| {
            let ids = token_ids(&PromptText::Text(s));
            (count_text(s).max(1), fingerprint(s), ids, false)
        };
        match obj.get("prompt") {
            Some(Value::String(s)) if !s.is_empty() => text(s),
            Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
                text(a[0].as_str().unwrap_or(""))
            }
            Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_u64) => {
                let ids: Vec<u64> = a.iter().filter_map(Value::as_u64).collect();
                (
                    a.len() as u32,
                    fingerprint(&serde_json::to_string(a).unwrap_or_default()),
                    token_ids(&PromptText::Ids(&ids)),
                    false,
                )
            }
            Some(Value::Array(a)) if a.iter().any(Value::is_number) => {
                return Err(bad(
                    "`prompt` as token ids must be whole numbers from 0 to 2^32-1",
                    "prompt",
                ));
            }
            Some(Value::Array(a)) if a.len() > 1 && a.iter().all(Value::is_string) => {
                return Err(bad(
                    "the simulator serves one prompt per request (`prompt` has several)",
                    "prompt",
                ));
            }
            None | Some(Value::Null) => return Err(bad("`prompt` is required", "prompt")),
            _ => {
                return Err(bad(
                    "`prompt` must be a non-empty string or a list of token ids",
                    "prompt",
                ));
            }
        }
    };
    let max_model_len = r.cfg.engine.max_model_len;
    let field = if chat
        && obj
            .get("max_completion_tokens")
            .is_some_and(|v| !v.is_null())
    {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let max_tokens = match obj.get(field) {
        None | Some(Value::Null) => max_model_len.saturating_sub(prompt_tokens).max(1),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => u32::try_from(n).unwrap_or(u32::MAX),
            _ => {
                return Err(bad(
                    format!("`{field}` must be an integer of at least 1, not {v}"),
                    field,
                ));
            }
        },
    };
    if let Some(t) = obj.get("temperature").filter(|t| !t.is_null()) {
        match t.as_f64() {
            Some(x) if x >= 0.0 && x.is_finite() => {}
            _ => {
                return Err(bad(
                    format!("`temperature` must be a non-negative number, not {t}"),
                    "temperature",
                ));
            }
        }
    }
    let sampling =
        sampling::parse(obj, chat, r.cfg.auto_tool_choice).map_err(|(m, f)| bad(m, f))?;
    let salt = match obj.get("cache_salt") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.as_str()),
        Some(v) => {
            return Err(bad(
                format!("`cache_salt` must be a non-empty string, not {v}"),
                "cache_salt",
            ));
        }
    };
    let stream = get_bool(body, "stream")?.unwrap_or(false);
    let include_usage = match obj.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(o) if !stream => {
            let _ = o;
            return Err(bad(
                "Stream options can only be defined when `stream=True`.",
                "stream_options",
            ));
        }
        Some(o) if !o.is_object() => {
            return Err(bad(
                format!("`stream_options` must be an object, not {o}"),
                "stream_options",
            ));
        }
        Some(o) => match o.get("include_usage") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(bad(
                    format!("`stream_options.include_usage` must be a boolean, not {other}"),
                    "stream_options",
                ));
            }
        },
    };
    let ignore_eos = get_bool(body, "ignore_eos")?.unwrap_or(false);
    let total = u64::from(prompt_tokens) + u64::from(max_tokens);
    if total > u64::from(max_model_len) {
        return Err(bad(
            format!(
                "This model's maximum context length is {max_model_len} tokens. However, you requested {total} tokens \
                 ({prompt_tokens} in the {}, {max_tokens} in the completion). Please reduce the length of the {} or completion.",
                if chat { "messages" } else { "prompt" },
                if chat { "messages" } else { "prompt" },
            ),
            field,
        ));
    }
    let blocks = if r.cfg.engine.prefix_caching {
        PromptBlocks::Hashes(block_hashes(&prompt_ids, BLOCK_SIZE as usize, salt).into())
    } else {
        PromptBlocks::Own
    };
    Ok(Generation {
        prompt_tokens,
        prompt_fingerprint,
        max_tokens,
        stream,
        include_usage,
        ignore_eos,
        sampling,
        blocks,
        last_is_tool,
    })
}

/// Cancels the engine requests of a response when it is dropped before they completed (the
/// client disconnected), as vLLM aborts on disconnect.
struct CancelGuard {
    engine: EngineHandle,
    /// Each choice's key, and whether it still runs.
    keys: Vec<(u64, bool)>,
}

impl CancelGuard {
    /// Choice `i` ended (`reason`: cancel it in the engine as well).
    fn end(&mut self, i: usize, reason: Option<FinishReason>) {
        if let Some((key, armed)) = self.keys.get_mut(i)
            && *armed
        {
            *armed = false;
            if let Some(reason) = reason {
                self.engine.cancel(*key, reason);
            }
        }
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        for i in 0..self.keys.len() {
            self.end(i, Some(FinishReason::Abort));
        }
    }
}

async fn generate(req: Request<Incoming>, r: &Arc<Replica>, chat: bool) -> Response<Body> {
    if !r.ready() {
        return health(r);
    }
    let limit = r.cfg.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {limit} bytes"),
            None,
        );
    }
    let body = match Limited::new(req.into_body(), limit).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {limit} bytes"),
                None,
            );
        }
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("could not read the request body: {e}"),
                None,
            );
        }
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("the request body is not valid JSON: {e}"),
                Some("body"),
            );
        }
    };
    let g = match validate(&value, chat, r) {
        Ok(g) => g,
        Err(resp) => return *resp,
    };
    let n = g.sampling.n;
    let key = r.keys.fetch_add(u64::from(n), Ordering::Relaxed);
    let fate = r.cfg.faults.draw(r.cfg.engine.seed, key, g.max_tokens);
    if fate.error_500 {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "injected fault: internal server error",
            None,
        );
    }
    if fate.stall {
        tokio::time::sleep(r.clock.wall(r.cfg.faults.stall_s)).await;
    }
    let seed = r.cfg.engine.seed;
    // A cut or a malformed stream is decided up front and carried out by the engine, so the
    // server's count (abort, error) and what the client sees always agree; so is where a
    // stop string or a tool call ends a sample (the text is deterministic).
    let fault = match (fate.cut_after, fate.malformed_after) {
        (Some(at), _) => Some((at.min(g.max_tokens), FinishReason::Abort)),
        (None, Some(at)) => Some((at.min(g.max_tokens), FinishReason::Error)),
        (None, None) => None,
    };
    let mut choices = Vec::with_capacity(n as usize);
    let mut keys = Vec::with_capacity(n as usize);
    // The samples share the prompt: its blocks are cached when the first is scheduled, so the
    // others find them (vLLM fans `n` out into child requests over one prefix).
    for i in 0..n {
        let plan = sampling::plan(
            &g.sampling,
            seed,
            g.prompt_fingerprint,
            i,
            g.max_tokens,
            g.last_is_tool,
        );
        let planned = plan
            .end
            .filter(|e| *e <= g.max_tokens)
            .map(|e| (e, FinishReason::Stop));
        let cut = match (fault, planned) {
            (Some(f), Some(p)) => Some(if f.0 < p.0 { f } else { p }),
            (f, p) => f.or(p),
        };
        let spec = RequestSpec {
            prompt_tokens: g.prompt_tokens,
            max_tokens: g.max_tokens,
            ignore_eos: g.ignore_eos || plan.call.is_some(),
        };
        let k = key + u64::from(i);
        let rx = r.engine.submit(k, spec, cut, g.blocks.clone());
        keys.push((k, true));
        choices.push(Choice {
            rx,
            plan,
            sent: 0,
            text_bytes: 0,
            done: None,
        });
    }
    let guard = CancelGuard {
        engine: r.engine.clone(),
        keys,
    };
    let created = inferscale_clock::unix(inferscale_clock::wall()).as_secs();
    let id = format!(
        "{}-{:016x}",
        if chat { "chatcmpl" } else { "cmpl" },
        inferscale_engine::mix(&[seed, r.index as u64, key])
    );
    let stream = Stream {
        choices,
        guard,
        chat,
        id,
        created,
        model_json: serde_json::to_string(&r.cfg.served_model_name)
            .unwrap_or_else(|_| "\"model\"".into()),
        seed,
        include_usage: g.include_usage,
        logprobs: g.sampling.logprobs,
        role_sent: false,
        fate,
        state: StreamState::Open,
    };
    if g.stream {
        let mut resp = Response::new(BoxBody::new(stream));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        resp
    } else {
        whole_response(stream).await
    }
}

/// One sample of a response, as it runs.
struct Choice {
    rx: mpsc::UnboundedReceiver<Update>,
    plan: Plan,
    /// Tokens sent.
    sent: u32,
    /// Bytes of text sent (a completion's logprobs count offsets in it).
    text_bytes: usize,
    /// How it ended: reason, prompt and output tokens.
    done: Option<(FinishReason, u32, u32)>,
}

impl Choice {
    /// `finish_reason` and `stop_reason` for how it ended.
    fn reasons(&self, reason: FinishReason, output: u32) -> (&'static str, Value) {
        let planned_end = reason == FinishReason::Stop && self.plan.end == Some(output);
        let finish = match &self.plan.call {
            Some(c) if reason == FinishReason::Stop => c.finish,
            _ => reason_label(reason),
        };
        let stop = match &self.plan.stop_reason {
            Some(s) if planned_end => Value::String(s.clone()),
            _ => Value::Null,
        };
        (finish, stop)
    }
}

async fn whole_response(mut s: Stream) -> Response<Body> {
    for i in 0..s.choices.len() {
        loop {
            match s.choices[i].rx.recv().await {
                Some(Update::Token(_)) => {}
                Some(Update::Done {
                    reason,
                    prompt,
                    output,
                }) => {
                    s.guard.end(i, None);
                    s.choices[i].done = Some((reason, prompt, output));
                    break;
                }
                None => {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "the engine stopped",
                        None,
                    );
                }
            }
        }
    }
    let seed = s.seed;
    let broken = s.choices.iter().find_map(|c| {
        let (reason, _, output) = c.done?;
        let faulted = (reason == FinishReason::Error && s.fate.malformed_after.is_some())
            || (reason == FinishReason::Abort && s.fate.cut_after.is_some());
        faulted.then(|| (reason, c.plan.text(seed, output)))
    });
    if let Some((reason, text)) = broken {
        let head = format!(
            "{{\"id\":\"{}\",\"object\":\"text_completion\",\"choices\":[{{\"text\":\"{}",
            s.id,
            text.trim()
        );
        if reason == FinishReason::Error {
            return full(StatusCode::OK, "application/json", head);
        }
        let mut resp = Response::new(futures_cut(head));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return resp;
    }
    let prompt = s.choices.first().and_then(|c| c.done).map_or(0, |d| d.1);
    let completion: u64 = s
        .choices
        .iter()
        .filter_map(|c| c.done)
        .map(|d| u64::from(d.2))
        .sum();
    let usage = Usage::new(u64::from(prompt), completion);
    let model: String = serde_json::from_str(&s.model_json).unwrap_or_default();
    if s.chat {
        let choices = s
            .choices
            .iter()
            .map(|c| {
                let (reason, _, output) = c.done.unwrap_or((FinishReason::Abort, 0, 0));
                let (finish, stop) = c.reasons(reason, output);
                let logprobs = s.logprobs.map(|k| {
                    let content: Vec<Value> = (0..output)
                        .map(|i| {
                            sampling::chat_logprob(
                                seed,
                                c.plan.fingerprint,
                                i,
                                &c.plan.piece(seed, i),
                                k,
                            )
                        })
                        .collect();
                    serde_json::json!({ "content": content })
                });
                let message = match &c.plan.call {
                    Some(call) => AssistantMessage {
                        role: "assistant".into(),
                        content: (!call.content_null).then(String::new),
                        tool_calls: vec![ToolCall {
                            id: call.id.clone(),
                            kind: "function".into(),
                            function: FunctionCall {
                                name: call.name.clone(),
                                arguments: c.plan.text(seed, output),
                            },
                        }],
                    },
                    None => AssistantMessage {
                        role: "assistant".into(),
                        content: Some(c.plan.text(seed, output)),
                        tool_calls: Vec::new(),
                    },
                };
                ChatChoice {
                    index: c.plan.index,
                    message,
                    logprobs,
                    finish_reason: Some(finish.to_owned()),
                    stop_reason: Some(stop),
                }
            })
            .collect();
        json(
            StatusCode::OK,
            &ChatCompletion {
                id: s.id.clone(),
                object: "chat.completion".into(),
                created: s.created,
                model,
                choices,
                usage,
            },
        )
    } else {
        let choices = s
            .choices
            .iter()
            .map(|c| {
                let (reason, _, output) = c.done.unwrap_or((FinishReason::Abort, 0, 0));
                let (finish, stop) = c.reasons(reason, output);
                CompletionChoice {
                    index: c.plan.index,
                    text: c.plan.text(seed, output),
                    logprobs: s
                        .logprobs
                        .map(|k| sampling::completion_logprobs(&c.plan, seed, 0, output, 0, k)),
                    finish_reason: Some(finish.to_owned()),
                    stop_reason: Some(stop),
                }
            })
            .collect();
        json(
            StatusCode::OK,
            &Completion {
                id: s.id.clone(),
                object: "text_completion".into(),
                created: s.created,
                model,
                choices,
                usage: Some(usage),
            },
        )
    }
}

fn reason_label(r: FinishReason) -> &'static str {
    r.label()
}

/// A body that sends `head`, then fails (the connection is dropped mid-response).
fn futures_cut(head: String) -> Body {
    BoxBody::new(CutBody {
        head: Some(Bytes::from(head)),
    })
}

struct CutBody {
    head: Option<Bytes>,
}

impl hyper::body::Body for CutBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.head.take() {
            Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
            None => Poll::Ready(Some(Err(std::io::Error::other(
                "injected fault: response cut",
            )))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamState {
    Open,
    /// Send an error next (a cut), then end.
    Cut,
    Closed,
}

/// A response's token streams, as server-sent events: each sample's chunks carry its index.
struct Stream {
    choices: Vec<Choice>,
    guard: CancelGuard,
    chat: bool,
    id: String,
    created: u64,
    model_json: String,
    seed: u64,
    include_usage: bool,
    /// Log probabilities asked for, with this many alternatives.
    logprobs: Option<u32>,
    role_sent: bool,
    fate: crate::faults::Fate,
    state: StreamState,
}

impl Stream {
    fn head(&self, out: &mut String) {
        out.push_str("data: {\"id\":\"");
        out.push_str(&self.id);
        out.push_str(if self.chat {
            "\",\"object\":\"chat.completion.chunk\",\"created\":"
        } else {
            "\",\"object\":\"text_completion\",\"created\":"
        });
        out.push_str(&self.created.to_string());
        out.push_str(",\"model\":");
        out.push_str(&self.model_json);
    }

    /// A chunk whose one choice is `choice` (a JSON object).
    fn chunk(&self, out: &mut String, choice: &Value) {
        self.head(out);
        out.push_str(",\"choices\":[");
        out.push_str(&choice.to_string());
        out.push_str("]}\n\n");
    }

    /// Output token `i` of choice `c`.
    fn token(&self, out: &mut String, c: &Choice, i: u32) {
        let seed = self.seed;
        let piece = c.plan.piece(seed, i);
        let index = c.plan.index;
        if self.logprobs.is_none() && c.plan.call.is_none() {
            // The common case, written directly (the load tests stream millions of these).
            self.head(out);
            if self.chat {
                out.push_str(&format!(
                    ",\"choices\":[{{\"index\":{index},\"delta\":{{\"content\":\""
                ));
                push_json_str(out, &piece);
                out.push_str("\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
            } else {
                out.push_str(&format!(",\"choices\":[{{\"index\":{index},\"text\":\""));
                push_json_str(out, &piece);
                out.push_str(
                    "\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}\n\n",
                );
            }
            return;
        }
        if let Some(call) = &c.plan.call {
            // The name goes out with the first token; the arguments as they are generated.
            let tool = if i == 0 {
                serde_json::json!({"index": 0, "id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": piece}})
            } else if i < call.head_tokens {
                return;
            } else {
                serde_json::json!({"index": 0, "function": {"arguments": piece}})
            };
            let mut delta = serde_json::json!({ "tool_calls": [tool] });
            if i == 0 && !call.content_null {
                delta["content"] = Value::String(String::new());
            }
            let logprobs = self.logprobs.map(|k| {
                serde_json::json!({"content": [sampling::chat_logprob(seed, c.plan.fingerprint, i, &piece, k)]})
            });
            self.chunk(
                out,
                &serde_json::json!({"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": null}),
            );
            return;
        }
        let k = self.logprobs.unwrap_or(0);
        if self.chat {
            let lp = sampling::chat_logprob(seed, c.plan.fingerprint, i, &piece, k);
            self.chunk(
                out,
                &serde_json::json!({"index": index, "delta": {"content": piece},
                    "logprobs": {"content": [lp]}, "finish_reason": null}),
            );
        } else {
            let lp = sampling::completion_logprobs(&c.plan, seed, i, i + 1, c.text_bytes, k);
            self.chunk(
                out,
                &serde_json::json!({"index": index, "text": piece, "logprobs": lp,
                    "finish_reason": null, "stop_reason": null}),
            );
        }
    }

    fn role(&self, out: &mut String, index: u32) {
        self.head(out);
        out.push_str(&format!(",\"choices\":[{{\"index\":{index},\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"));
    }

    fn finish(&self, out: &mut String, c: &Choice, reason: FinishReason, output: u32) {
        let (finish, stop) = c.reasons(reason, output);
        let index = c.plan.index;
        if self.chat {
            self.chunk(
                out,
                &serde_json::json!({"index": index, "delta": {}, "logprobs": null,
                    "finish_reason": finish, "stop_reason": stop}),
            );
        } else {
            self.chunk(
                out,
                &serde_json::json!({"index": index, "text": "", "logprobs": null,
                    "finish_reason": finish, "stop_reason": stop}),
            );
        }
    }

    fn usage(&self, out: &mut String) {
        let prompt = self.choices.first().and_then(|c| c.done).map_or(0, |d| d.1);
        let output: u32 = self
            .choices
            .iter()
            .filter_map(|c| c.done)
            .map(|d| d.2)
            .sum();
        self.head(out);
        out.push_str(&format!(
            ",\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"total_tokens\":{},\"completion_tokens\":{output}}}}}\n\n",
            prompt + output
        ));
    }
}

fn push_json_str(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
}

impl hyper::body::Body for Stream {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        match this.state {
            StreamState::Closed => return Poll::Ready(None),
            StreamState::Cut => {
                this.state = StreamState::Closed;
                return Poll::Ready(Some(Err(std::io::Error::other(
                    "injected fault: stream cut",
                ))));
            }
            StreamState::Open => {}
        }
        let mut out = String::new();
        if this.chat && !this.role_sent {
            this.role_sent = true;
            for c in &this.choices {
                this.role(&mut out, c.plan.index);
            }
        }
        for i in 0..this.choices.len() {
            while this.choices[i].done.is_none() && this.state == StreamState::Open {
                match this.choices[i].rx.poll_recv(cx) {
                    Poll::Ready(Some(Update::Token(n))) => {
                        for t in this.choices[i].sent..n {
                            this.token(&mut out, &this.choices[i], t);
                            // A completion's logprobs give each token's offset in the text.
                            let offsets = this.logprobs.is_some() && !this.chat;
                            let c = &mut this.choices[i];
                            if offsets {
                                c.text_bytes += c.plan.piece(this.seed, t).len();
                            }
                            c.sent = t + 1;
                        }
                    }
                    Poll::Ready(Some(Update::Done {
                        reason,
                        prompt,
                        output,
                    })) => {
                        this.guard.end(i, None);
                        this.choices[i].done = Some((reason, prompt, output));
                        if reason == FinishReason::Abort && this.fate.cut_after.is_some() {
                            this.state = StreamState::Cut;
                        } else if reason == FinishReason::Error
                            && this.fate.malformed_after.is_some()
                        {
                            this.head(&mut out);
                            out.push_str(",\"choices\":[{\"index\":0,\"text\":\" broken\\u00\n\n");
                            this.state = StreamState::Closed;
                        } else {
                            this.finish(&mut out, &this.choices[i], reason, output);
                        }
                    }
                    Poll::Ready(None) => {
                        this.guard.end(i, None);
                        this.state = StreamState::Closed;
                    }
                    Poll::Pending => break,
                }
            }
        }
        if this.state == StreamState::Open && this.choices.iter().all(|c| c.done.is_some()) {
            if this.include_usage {
                this.usage(&mut out);
            }
            out.push_str("data: [DONE]\n\n");
            this.state = StreamState::Closed;
        }
        if out.is_empty() {
            return match this.state {
                StreamState::Open => Poll::Pending,
                StreamState::Cut => {
                    this.state = StreamState::Closed;
                    Poll::Ready(Some(Err(std::io::Error::other(
                        "injected fault: stream cut",
                    ))))
                }
                StreamState::Closed => Poll::Ready(None),
            };
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))))
    }
}

/// Serves a set of replicas until `shutdown` resolves.
pub(crate) async fn serve_all(
    replicas: Vec<(Arc<Replica>, TcpListener, Option<TcpListener>)>,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    for (r, api, dcgm) in replicas {
        tasks.push(tokio::spawn(serve_listener(
            api,
            Arc::clone(&r),
            false,
            stop_rx.clone(),
        )));
        if let Some(d) = dcgm {
            tasks.push(tokio::spawn(serve_listener(d, r, true, stop_rx.clone())));
        }
    }
    shutdown.await;
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
}
