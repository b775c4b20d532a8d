//! Sending one request and watching its response: HTTP/1.1 with or without connection reuse,
//! a deadline, and streaming responses decoded event by event as the bytes arrive.

use inferscale_clock::Instant;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use inferscale_openai::SseDecoder;

use crate::h1::{Wire, WireError};

use crate::auth::Auth;
use crate::target::Target;

pub use inferscale_workload::outcome::{Outcome, TokenSource};

/// What one request did (times are instants; the runner turns them into run seconds).
#[derive(Debug, Clone)]
pub struct Exchange {
    /// When the request started to be written (after connecting).
    pub sent: Option<Instant>,
    /// When each token-bearing event arrived (the first is the first token).
    pub token_events: Vec<Instant>,
    /// When the response ended (or failed).
    pub end: Instant,
    /// The outcome.
    pub outcome: Outcome,
    /// Output tokens (see `token_source`).
    pub output_tokens: Option<u32>,
    /// Prompt tokens, from `usage`.
    pub prompt_tokens: Option<u32>,
    /// Where `output_tokens` came from.
    pub token_source: Option<TokenSource>,
    /// Why it failed, in words.
    pub error: Option<String>,
}

impl Exchange {
    /// An exchange intended at `intended`, not yet answered.
    pub fn begun(intended: Instant) -> Exchange {
        Exchange {
            sent: None,
            token_events: Vec::new(),
            end: intended,
            outcome: Outcome::Timeout,
            output_tokens: None,
            prompt_tokens: None,
            token_source: None,
            error: None,
        }
    }

    /// Ends it now with what [`Client::follow`] returned.
    pub fn conclude(&mut self, result: Result<(), (Outcome, String)>) {
        self.end = Instant::now();
        match result {
            Ok(()) => self.outcome = Outcome::Ok,
            Err((outcome, why)) => {
                self.outcome = outcome;
                self.error = Some(why);
            }
        }
    }

    /// Ends it now as timed out, `timeout` after its intended send time.
    pub fn expire(&mut self, timeout: Duration) {
        self.end = Instant::now();
        self.outcome = Outcome::Timeout;
        self.error = Some(format!(
            "no complete answer within {timeout:?} of the intended send time"
        ));
    }
}

/// Connection and deadline settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server.
    pub target: Target,
    /// Keep connections open between requests (k6's default; the seeds' runs did not).
    pub reuse: bool,
    /// Give up on a request this long after its intended send time.
    pub timeout: Duration,
    /// Refuse response bodies larger than this.
    pub max_body: usize,
    /// Credentials and extra headers sent with every request.
    pub auth: Auth,
    /// TLS for an `https://` target (`None`: the Mozilla roots).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// One HTTP/1.1 connection of the request path (dropping it closes the socket: a request
/// given up on must not linger on the server).
type Conn = Wire<crate::tls::Stream>;

/// Connections [`Client::preconnect`] opens at once.
const PRECONNECT_WAVE: usize = 128;

/// A pool of HTTP/1.1 connections to one server.
pub struct Client {
    cfg: ClientConfig,
    idle: Mutex<Vec<Conn>>,
    /// The request head's lines after the request line, up to the body's length: `Host`,
    /// `Content-Type`, the credentials, and `Connection: close` without reuse.
    fixed: Vec<u8>,
}

/// What a stream event carried, found without building a document.
#[derive(Debug, Default, PartialEq)]
struct EventInfo {
    done: bool,
    has_token: bool,
    usage: Option<(Option<u32>, Option<u32>)>,
}

/// A stream event whose payload is not JSON (its first 80 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed event: {0}")]
struct MalformedEvent(String);

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    /// The default TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The TCP connect or the TLS handshake failed.
    #[error("cannot connect to {authority}: {error}")]
    Connect {
        /// `host:port`.
        authority: String,
        /// Why (in the message: the load report keeps one line).
        error: std::io::Error,
    },
}

/// Looks at one `data:` payload: `[DONE]`, or a JSON chunk with text and/or usage. The payload
/// must be valid JSON (checked without allocating); the fields are found by scanning, which is
/// safe because a key like `"text":"` cannot occur unescaped inside a JSON string.
fn inspect(data: &str) -> Result<EventInfo, MalformedEvent> {
    if data == "[DONE]" {
        return Ok(EventInfo {
            done: true,
            ..EventInfo::default()
        });
    }
    if inferscale_openai::json::validate(data.as_bytes()).is_err() {
        let shown: String = data.chars().take(80).collect();
        return Err(MalformedEvent(shown));
    }
    let non_empty_after = |key: &str| {
        data.find(key)
            .is_some_and(|i| data.as_bytes().get(i + key.len()) != Some(&b'"'))
    };
    let has_token = non_empty_after("\"text\":\"") || non_empty_after("\"content\":\"");
    let usage = data.find("\"usage\":{").map(|i| {
        let tail = &data[i..];
        let num = |key: &str| {
            tail.find(key).and_then(|j| {
                let digits: String = tail[j + key.len()..]
                    .chars()
                    .skip_while(|c| *c == ' ')
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<u32>().ok()
            })
        };
        (num("\"prompt_tokens\":"), num("\"completion_tokens\":"))
    });
    Ok(EventInfo {
        done: false,
        has_token,
        usage,
    })
}

impl Client {
    /// A client for `cfg`.
    pub fn new(cfg: ClientConfig) -> Self {
        let mut fixed = Vec::with_capacity(256);
        fixed.extend_from_slice(b"host: ");
        fixed.extend_from_slice(cfg.target.authority().as_bytes());
        fixed.extend_from_slice(b"\r\ncontent-type: application/json\r\n");
        // Names and values were checked when the credentials were read (no line breaks).
        for (name, value) in cfg.auth.headers() {
            fixed.extend_from_slice(name.as_str().as_bytes());
            fixed.extend_from_slice(b": ");
            fixed.extend_from_slice(value.as_bytes());
            fixed.extend_from_slice(b"\r\n");
        }
        if !cfg.reuse {
            fixed.extend_from_slice(b"connection: close\r\n");
        }
        Client {
            cfg,
            idle: Mutex::new(Vec::new()),
            fixed,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    async fn connect(&self) -> Result<Conn, ConnectError> {
        let t = &self.cfg.target;
        let tls = match (t.tls, &self.cfg.tls) {
            (false, _) => None,
            (true, Some(c)) => Some(Arc::clone(c)),
            (true, None) => Some(crate::tls::default_config()?),
        };
        let stream = crate::tls::connect(&t.host, t.port, tls.as_ref())
            .await
            .map_err(|error| ConnectError::Connect {
                authority: t.authority(),
                error,
            })?;
        Ok(Wire::new(stream))
    }

    /// Opens up to `n` connections ahead of a run (with connection reuse), so that the first
    /// requests do not pay the handshake and a server is not hit by a burst of connects at the
    /// start. They are opened 128 at a time, within what a server's listen
    /// backlog takes. Returns how many are ready; failures are left for the requests to
    /// report.
    pub async fn preconnect(&self, n: usize) -> usize {
        if !self.cfg.reuse {
            return 0;
        }
        let mut ready = 0;
        let mut left = n;
        while left > 0 {
            let wave = left.min(PRECONNECT_WAVE);
            left -= wave;
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..wave {
                let c = Client::new(self.cfg.clone());
                set.spawn(async move { c.connect().await });
            }
            while let Some(r) = set.join_next().await {
                if let Ok(Ok(conn)) = r
                    && let Ok(mut idle) = self.idle.lock()
                {
                    idle.push(conn);
                    ready += 1;
                }
            }
        }
        ready
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(mut c) = idle.pop() {
            if c.usable() {
                return Some(c);
            }
        }
        None
    }

    /// Sends `body` to `path` and follows the response until it ends, fails, or the deadline
    /// (`intended` + timeout) passes.
    pub async fn send(&self, path: &str, body: &[u8], intended: Instant, stream: bool) -> Exchange {
        let deadline = intended + self.cfg.timeout;
        let mut ex = Exchange::begun(intended);
        match tokio::time::timeout_at(deadline, self.follow(path, body, stream, &mut ex)).await {
            Ok(result) => ex.conclude(result),
            Err(_) => ex.expire(self.cfg.timeout),
        }
        ex
    }

    /// Writes the request for `body` to `path` into `out`.
    fn request(&self, out: &mut Vec<u8>, path: &str, body: &[u8]) {
        out.extend_from_slice(b"POST ");
        out.extend_from_slice(self.cfg.target.base_path().as_bytes());
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        out.extend_from_slice(&self.fixed);
        out.extend_from_slice(b"content-length: ");
        decimal(out, body.len());
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body);
    }

    /// Sends `body` to `path` and follows the response until it ends or fails, filling `ex`
    /// as it goes (conclude it with [`Exchange::conclude`]), with no deadline of its own: the
    /// caller enforces one by dropping this future (then [`Exchange::expire`]). The load run
    /// does so for all its requests with one periodic sweep, rather than a timer per request.
    pub async fn follow(
        &self,
        path: &str,
        body: &[u8],
        stream: bool,
        ex: &mut Exchange,
    ) -> Result<(), (Outcome, String)> {
        let failed = |e: std::io::Error| (Outcome::StreamError, format!("request failed: {e}"));
        // Dropping `conn` on any early return (an error, or the deadline cancelling this
        // future) closes the socket.
        let mut conn = match self.take_idle().filter(|_| self.cfg.reuse) {
            Some(c) => c,
            // Boxed: connecting (and a TLS handshake) needs a large future, which would
            // otherwise make every request's task that large, reused connection or not.
            None => Box::pin(self.connect())
                .await
                .map_err(|e| (Outcome::ConnectError, e.to_string()))?,
        };
        ex.sent = Some(Instant::now());
        conn.send(|out| self.request(out, path, body))
            .await
            .map_err(failed)?;
        let cut = |e: WireError| (Outcome::StreamError, format!("the response was cut: {e}"));
        let resp = conn.head().await.map_err(|e| match e {
            WireError::Closed(_) | WireError::Io(_) => {
                (Outcome::StreamError, format!("request failed: {e}"))
            }
            WireError::Malformed(_) => (Outcome::StreamError, e.to_string()),
        })?;
        if resp.status != 200 {
            // Read (a bounded part of) the error body so that the connection is left clean
            // (it is not reused either way), keeping its start: the server's reason.
            let mut seen = 0usize;
            let mut head = Vec::new();
            let _ = conn
                .body(resp.framing, |d| {
                    seen += d.len();
                    let room = ERROR_BODY_KEPT.saturating_sub(head.len());
                    head.extend_from_slice(&d[..d.len().min(room)]);
                    if seen > 64 * 1024 { Err(()) } else { Ok(()) }
                })
                .await;
            let status = http::StatusCode::from_u16(resp.status)
                .map_or_else(|_| resp.status.to_string(), |s| s.to_string());
            return Err((
                Outcome::HttpError {
                    status: resp.status,
                },
                match error_reason(&head) {
                    Some(why) => format!("HTTP {status}: {why}"),
                    None => format!("HTTP {status}"),
                },
            ));
        }
        let mut decoder = SseDecoder::new(self.cfg.max_body);
        let mut events = Vec::new();
        let mut whole = Vec::new();
        let mut done = false;
        let mut usage: Option<(Option<u32>, Option<u32>)> = None;
        let max_body = self.cfg.max_body;
        let reusable = conn
            .body(resp.framing, |data| {
                if !stream {
                    if whole.len() + data.len() > max_body {
                        return Err((
                            Outcome::StreamError,
                            "the response body is too large".to_owned(),
                        ));
                    }
                    whole.extend_from_slice(data);
                    return Ok(());
                }
                let now = Instant::now();
                decoder
                    .feed(data, &mut events)
                    .map_err(|e| (Outcome::StreamError, e.to_string()))?;
                for e in events.drain(..) {
                    let info =
                        inspect(&e.data).map_err(|m| (Outcome::StreamError, m.to_string()))?;
                    if info.done {
                        done = true;
                    }
                    if info.has_token {
                        ex.token_events.push(now);
                    }
                    if info.usage.is_some() {
                        usage = info.usage;
                    }
                }
                Ok(())
            })
            .await
            .map_err(cut)??;
        if stream {
            decoder
                .finish(&mut events)
                .map_err(|e| (Outcome::StreamError, e.to_string()))?;
            for e in events.drain(..) {
                let info = inspect(&e.data).map_err(|m| (Outcome::StreamError, m.to_string()))?;
                done |= info.done;
            }
            if !done {
                return Err((
                    Outcome::StreamError,
                    "the stream ended before [DONE]".into(),
                ));
            }
            match usage {
                Some((p, Some(c))) => {
                    ex.output_tokens = Some(c);
                    ex.prompt_tokens = p;
                    ex.token_source = Some(TokenSource::Usage);
                }
                _ => {
                    ex.output_tokens = Some(ex.token_events.len() as u32);
                    ex.token_source = Some(TokenSource::Chunks);
                }
            }
        } else {
            let usage = inferscale_openai::json::completion_usage(&whole)
                .map_err(|e| (Outcome::StreamError, format!("malformed response: {e}")))?;
            if let Some(u) = usage {
                ex.output_tokens = u
                    .completion_tokens
                    .map(|c| c.min(u64::from(u32::MAX)) as u32);
                ex.prompt_tokens = u.prompt_tokens.map(|c| c.min(u64::from(u32::MAX)) as u32);
                ex.token_source = Some(TokenSource::Usage);
            }
        }
        if self.cfg.reuse
            && reusable
            && !resp.close
            && let Ok(mut idle) = self.idle.lock()
        {
            idle.push(conn);
        }
        Ok(())
    }
}

/// Appends `n` in decimal (a request's `Content-Length`, without the formatter's machinery).
fn decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// What a one-off `GET` answered.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The HTTP status.
    pub status: u16,
    /// The body, whole.
    pub body: Bytes,
    /// The `Content-Type` header, when there was one.
    pub content_type: Option<String>,
}

/// How a one-off `GET` is made.
#[derive(Debug, Clone)]
pub struct Get {
    /// The `Accept` header.
    pub accept: String,
    /// For the whole exchange: connect, headers and body.
    pub timeout: Duration,
    /// Bodies larger than this are refused.
    pub max_body: usize,
    /// Credentials and extra headers.
    pub auth: Auth,
    /// TLS for an `https://` target (`None`: the Mozilla roots).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Get {
    /// The credentials and TLS of a client configuration, for one-off reads of the same
    /// server (its models, its health, its metrics).
    pub fn like(client: &ClientConfig) -> Get {
        let mut g = Get::new("*/*");
        g.auth = client.auth.clone();
        g.tls = client.tls.clone();
        g
    }

    /// A `GET` accepting `accept`, with a 5-second timeout, a 64 MiB body limit and no
    /// credentials.
    pub fn new(accept: &str) -> Get {
        Get {
            accept: accept.to_owned(),
            timeout: Duration::from_secs(5),
            max_body: 64 << 20,
            auth: Auth::none(),
            tls: None,
        }
    }
}

/// Why a one-off `GET` got no answer. Each names the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// No connection.
    #[error("cannot connect to {authority}")]
    Connect {
        /// `host:port`.
        authority: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The connection opened but HTTP failed on it.
    #[error("HTTP failed with {authority}")]
    Http {
        /// `host:port`.
        authority: String,
        /// Why.
        #[source]
        source: hyper::Error,
    },
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The request could not be built (a path or header hyper refuses).
    #[error("cannot build the request to {authority}")]
    Request {
        /// `host:port`.
        authority: String,
        /// Why.
        #[source]
        source: http::Error,
    },
    /// The body is over the limit.
    #[error("the body from {authority} is larger than {max_body} bytes (raise --max-body)")]
    TooLarge {
        /// `host:port`.
        authority: String,
        /// The limit.
        max_body: usize,
    },
    /// Reading the body failed.
    #[error("reading the body from {authority} failed: {reason}")]
    Body {
        /// `host:port`.
        authority: String,
        /// Why.
        reason: String,
    },
    /// Nothing whole within the timeout.
    #[error("timed out after {} waiting for {authority}", crate::target::format_duration(*after))]
    Timeout {
        /// `host:port`.
        authority: String,
        /// The timeout.
        after: Duration,
    },
}

/// A `GET` with no pool, for one-off reads of any URL (a scrape, `/v1/models`, `/health`).
pub async fn get(target: &Target, how: &Get) -> Result<Fetched, FetchError> {
    let authority = target.authority();
    let fut = async {
        let mut opened = open_unbounded(target, how).await?;
        let (status, content_type) = (opened.status, opened.content_type.clone());
        let body = http_body_util::Limited::new(&mut opened.body, how.max_body)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    FetchError::TooLarge {
                        authority: authority.clone(),
                        max_body: how.max_body,
                    }
                } else {
                    FetchError::Body {
                        authority: authority.clone(),
                        reason: e.to_string(),
                    }
                }
            })?
            .to_bytes();
        drop(opened);
        Ok(Fetched {
            status,
            body,
            content_type,
        })
    };
    match tokio::time::timeout(how.timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout {
            authority: authority.clone(),
            after: how.timeout,
        }),
    }
}

/// A `GET` whose body is read as it comes: a stream that lasts (a Kubernetes watch). The
/// connection closes when it is dropped.
#[derive(Debug)]
pub struct Opened {
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type` header, when there was one.
    pub content_type: Option<String>,
    authority: String,
    body: hyper::body::Incoming,
    conn: tokio::task::JoinHandle<Result<(), hyper::Error>>,
}

impl Opened {
    /// The body's next bytes; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, FetchError> {
        loop {
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(FetchError::Body {
                        authority: self.authority.clone(),
                        reason: e.to_string(),
                    });
                }
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        return Ok(Some(d));
                    }
                }
            }
        }
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.conn.abort();
    }
}

/// Opens a `GET` and waits for its headers, within `how.timeout`; the body then comes at
/// its own pace through [`Opened::chunk`] (`how.max_body` does not apply: the reader bounds
/// what it keeps).
pub async fn open(target: &Target, how: &Get) -> Result<Opened, FetchError> {
    match tokio::time::timeout(how.timeout, open_unbounded(target, how)).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout {
            authority: target.authority(),
            after: how.timeout,
        }),
    }
}

async fn open_unbounded(target: &Target, how: &Get) -> Result<Opened, FetchError> {
    let authority = target.authority();
    let tls = match (target.tls, &how.tls) {
        (false, _) => None,
        (true, Some(c)) => Some(Arc::clone(c)),
        (true, None) => Some(crate::tls::default_config()?),
    };
    let stream = crate::tls::connect(&target.host, target.port, tls.as_ref())
        .await
        .map_err(|source| FetchError::Connect {
            authority: authority.clone(),
            source,
        })?;
    let http = |source| FetchError::Http {
        authority: authority.clone(),
        source,
    };
    let (mut s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(http)?;
    let conn = tokio::spawn(conn);
    let req = how
        .auth
        .apply(
            http::Request::get(target.path_and_query.as_str())
                .header(http::header::HOST, &authority)
                .header(http::header::ACCEPT, &how.accept)
                .header(
                    http::header::USER_AGENT,
                    concat!("inferscale/", env!("CARGO_PKG_VERSION")),
                ),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|source| FetchError::Request {
            authority: authority.clone(),
            source,
        })?;
    let resp = match s.send_request(req).await {
        Ok(r) => r,
        Err(e) => {
            conn.abort();
            return Err(http(e));
        }
    };
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok(Opened {
        status,
        content_type,
        authority,
        body: resp.into_body(),
        conn,
    })
}

/// Why a server did not become ready.
#[derive(Debug, thiserror::Error)]
#[error("{url} did not answer 200 within {}{}", crate::target::format_duration(*within), last.as_ref().map_or(String::new(), |l| format!(" (last: {l})")))]
pub struct NotReady {
    /// The health URL.
    pub url: String,
    /// How long it was given.
    pub within: Duration,
    /// The last answer or failure, in words.
    pub last: Option<String>,
}

/// How much of an error response's body is kept to find the server's reason in.
const ERROR_BODY_KEPT: usize = 4096;

/// The longest reason a record keeps, in characters.
const REASON_CHARS: usize = 300;

/// The server's reason in an error body, as OpenAI-compatible servers write it
/// (`{"error": {"message": …}}`, `{"error": "…"}`, `{"message": …}`, FastAPI's `{"detail":
/// …}`) or as plain text; at most [`REASON_CHARS`] characters, on one line.
fn error_reason(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let json = serde_json::from_str::<serde_json::Value>(text).ok();
    let found = json.as_ref().and_then(|v| {
        [
            v.pointer("/error/message"),
            v.get("error"),
            v.get("message"),
            v.get("detail"),
        ]
        .into_iter()
        .flatten()
        .find_map(|x| match x {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null | serde_json::Value::Object(_) => None,
            other => Some(other.to_string()),
        })
    });
    let why = match (found, json) {
        (Some(w), _) => w,
        // Plain text, not an HTML page.
        (None, None) if !text.is_empty() && !text.starts_with('<') => text.to_owned(),
        _ => return None,
    };
    let one_line: String = why.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one_line.chars().take(REASON_CHARS).collect();
    if one_line.chars().count() > REASON_CHARS {
        out.push('…');
    }
    (!out.is_empty()).then_some(out)
}

/// Polls `target` (a `/health` URL) until it answers 200, for at most `within`, with
/// `access`'s credentials and TLS: every 50 ms at first, backing off to once a second (a
/// model that loads for minutes is not polled 20 times a second). A model that is still
/// loading answers 503; that is waited through.
pub async fn wait_ready(target: &Target, access: &Get, within: Duration) -> Result<(), NotReady> {
    let deadline = Instant::now() + within;
    let mut how = access.clone();
    how.accept = "*/*".into();
    how.timeout = Duration::from_secs(2).min(within.max(Duration::from_millis(100)));
    how.max_body = 1 << 16;
    let mut pause = Duration::from_millis(50);
    loop {
        let last = match get(target, &how).await {
            Ok(f) if f.status == 200 => return Ok(()),
            Ok(f) => format!("HTTP {}", f.status),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(NotReady {
                url: target.url.clone(),
                within,
                last: Some(last),
            });
        }
        tokio::time::sleep(pause.min(deadline - Instant::now())).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_gives_the_servers_reason() {
        let reason = |b: &str| error_reason(b.as_bytes());
        assert_eq!(
            reason(r#"{"error":{"code":400,"message":"request (4899 tokens) exceeds the available context size (1024 tokens)","type":"exceed_context_size_error"}}"#).as_deref(),
            Some("request (4899 tokens) exceeds the available context size (1024 tokens)")
        );
        assert_eq!(
            reason(r#"{"detail":"Not Found"}"#).as_deref(),
            Some("Not Found")
        );
        assert_eq!(reason(r#"{"error":"busy"}"#).as_deref(), Some("busy"));
        assert_eq!(
            reason("model is\n loading").as_deref(),
            Some("model is loading")
        );
        assert_eq!(reason("<html><body>502</body></html>"), None);
        assert_eq!(reason(r#"{"ok":false}"#), None);
        assert_eq!(reason(""), None);
        let long = format!("{{\"message\":\"{}\"}}", "x".repeat(500));
        assert_eq!(reason(&long).unwrap().chars().count(), REASON_CHARS + 1);
    }

    #[test]
    fn events_are_inspected_without_a_document() {
        let t = r#"{"id":"c","object":"text_completion","choices":[{"index":0,"text":" hi","finish_reason":null}]}"#;
        assert_eq!(
            inspect(t).unwrap(),
            EventInfo {
                done: false,
                has_token: true,
                usage: None
            }
        );
        let empty = r#"{"id":"c","choices":[{"index":0,"text":"","finish_reason":"length"}]}"#;
        assert!(!inspect(empty).unwrap().has_token);
        let chat = r#"{"id":"c","choices":[{"index":0,"delta":{"content":"x"}}]}"#;
        assert!(inspect(chat).unwrap().has_token);
        let role =
            r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
        assert!(!inspect(role).unwrap().has_token);
        let usage = r#"{"id":"c","choices":[],"usage":{"prompt_tokens":35,"total_tokens":135,"completion_tokens":100}}"#;
        assert_eq!(inspect(usage).unwrap().usage, Some((Some(35), Some(100))));
        assert!(inspect("[DONE]").unwrap().done);
        assert!(inspect(r#"{"id":"c","choices":[{"text":" broken\u00"#).is_err());
        // A key inside a string value is not a key.
        let tricky = r#"{"note":"\"text\":\"x","choices":[{"text":""}]}"#;
        assert!(!inspect(tricky).unwrap().has_token);
    }

    #[test]
    fn lengths_are_written_in_decimal() {
        for n in [0usize, 7, 10, 99, 100, 4096, 1_000_001, usize::MAX] {
            let mut out = b"x".to_vec();
            decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }

    #[test]
    fn a_request_future_stays_small() {
        // Every request is a task that carries this future, moved on spawn; a large local
        // held across a wait (once: a parser's header slots, kilobytes) made each request
        // cost several kilobytes of copying. Connecting is boxed for the same reason.
        let c = Client::new(ClientConfig {
            target: crate::target::Target::parse("http://127.0.0.1:1").unwrap(),
            reuse: true,
            timeout: Duration::from_secs(1),
            max_body: 1,
            auth: Default::default(),
            tls: None,
        });
        let f = c.send("/v1/completions", b"", Instant::now(), true);
        let size = std::mem::size_of_val(&f);
        assert!(size <= 1536, "a request's future is {size} bytes");
    }
}
