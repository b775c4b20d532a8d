//! The gRPC client: one HTTP/2 connection (cleartext with prior knowledge, or TLS with ALPN
//! `h2`) carrying any number of concurrent calls.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::{Code, MAX_MESSAGE, Message, Status, decode_message, frame, unframe};

/// A connection to a gRPC server.
#[derive(Debug, Clone)]
pub struct Channel {
    sender: SendRequest<Full<Bytes>>,
    authority: String,
    scheme: &'static str,
    timeout: Option<Duration>,
}

impl Channel {
    /// Connects to `addr` (`host:port`) in cleartext (h2c with prior knowledge, as KEDA's
    /// `scalerAddress` without `enableTLS`).
    pub async fn connect(addr: &str) -> Result<Channel, Status> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| Status::unavailable(format!("cannot connect to {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        Channel::handshake(TokioIo::new(stream), addr, "http").await
    }

    /// Connects to `addr` over TLS, checking the server's certificate against `config`'s
    /// roots for `server_name`.
    pub async fn connect_tls(
        addr: &str,
        server_name: &str,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Channel, Status> {
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let name = rustls::pki_types::ServerName::try_from(server_name.to_owned())
            .map_err(|e| Status::invalid_argument(format!("{server_name:?}: {e}")))?;
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| Status::unavailable(format!("cannot connect to {addr}: {e}")))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, stream)
            .await
            .map_err(|e| Status::unavailable(format!("TLS with {addr} failed: {e}")))?;
        Channel::handshake(TokioIo::new(tls), addr, "https").await
    }

    async fn handshake<I>(io: I, addr: &str, scheme: &'static str) -> Result<Channel, Status>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| Status::unavailable(format!("HTTP/2 with {addr} failed: {e}")))?;
        tokio::spawn(conn);
        Ok(Channel {
            sender,
            authority: addr.to_owned(),
            scheme,
            timeout: None,
        })
    }

    /// Sends `grpc-timeout` with every call (the server gives up after it), and gives up
    /// itself a little later.
    pub fn with_timeout(mut self, timeout: Duration) -> Channel {
        self.timeout = Some(timeout);
        self
    }

    /// A unary call.
    pub async fn unary<Q: Message, R: Message>(
        &self,
        path: &str,
        request: &Q,
    ) -> Result<R, Status> {
        let call = async {
            let mut s = self.server_streaming::<Q, R>(path, request).await?;
            let m = s
                .message()
                .await?
                .ok_or_else(|| Status::internal("the call ended without a message"))?;
            match s.message().await? {
                None => Ok(m),
                Some(_) => Err(Status::internal(
                    "a unary call answered more than one message",
                )),
            }
        };
        match self.timeout {
            None => call.await,
            Some(t) => tokio::time::timeout(t + Duration::from_secs(1), call)
                .await
                .unwrap_or_else(|_| {
                    Err(Status::new(
                        Code::DeadlineExceeded,
                        format!(
                            "no answer from {} within {} ms",
                            self.authority,
                            t.as_millis()
                        ),
                    ))
                }),
        }
    }

    /// A server-streaming call: its messages come from [`Streaming::message`].
    pub async fn server_streaming<Q: Message, R: Message>(
        &self,
        path: &str,
        request: &Q,
    ) -> Result<Streaming<R>, Status> {
        let mut b = Request::post(format!("{}://{}{path}", self.scheme, self.authority))
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers")
            .header(
                http::header::USER_AGENT,
                concat!("inferscale/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(t) = self.timeout {
            b = b.header("grpc-timeout", format!("{}m", t.as_millis().max(1)));
        }
        let req = b
            .body(Full::new(frame(&request.to_bytes())))
            .map_err(|e| Status::internal(format!("cannot build the request: {e}")))?;
        let resp = self
            .sender
            .clone()
            .send_request(req)
            .await
            .map_err(|e| Status::unavailable(format!("{}: {e}", self.authority)))?;
        if resp.status() != StatusCode::OK {
            return Err(from_http(resp.status()));
        }
        // A trailers-only response carries the status in its headers.
        if let Some(s) = status_of(resp.headers()) {
            s?;
        }
        Ok(Streaming {
            body: resp.into_body(),
            buf: Vec::new(),
            ended: false,
            _message: PhantomData,
        })
    }
}

/// gRPC's mapping of an HTTP status that is not 200.
fn from_http(s: StatusCode) -> Status {
    let code = match s.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Status::new(code, format!("HTTP {s}"))
}

/// `Some(Ok)` for `grpc-status: 0`, `Some(Err)` for another, `None` when absent.
fn status_of(h: &HeaderMap) -> Option<Result<(), Status>> {
    let code = h.get("grpc-status")?;
    let code = code
        .to_str()
        .ok()
        .and_then(|c| c.parse::<u32>().ok())
        .map_or(Code::Unknown, Code::from_number);
    if code == Code::Ok {
        return Some(Ok(()));
    }
    let message = h
        .get("grpc-message")
        .map(|m| decode_message(m.as_bytes()))
        .unwrap_or_default();
    Some(Err(Status::new(code, message)))
}

/// The messages of a call, in order, then its status.
#[derive(Debug)]
pub struct Streaming<R> {
    body: Incoming,
    buf: Vec<u8>,
    ended: bool,
    _message: PhantomData<fn() -> R>,
}

impl<R: Message> Streaming<R> {
    /// The next message; `Ok(None)` once the call ended with status OK, `Err` if it ended
    /// with another.
    pub async fn message(&mut self) -> Result<Option<R>, Status> {
        loop {
            if let Some((m, used)) = unframe(&self.buf)? {
                let r = R::decode(m)
                    .map_err(|e| Status::internal(format!("an undecodable message: {e}")))?;
                self.buf.drain(..used);
                return Ok(Some(r));
            }
            if self.ended {
                return Ok(None);
            }
            match self.body.frame().await {
                None => return Err(Status::internal("the call ended without a grpc-status")),
                Some(Err(e)) => return Err(Status::unavailable(format!("the call broke: {e}"))),
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => {
                        if self.buf.len() + d.len() > MAX_MESSAGE + 5 {
                            return Err(Status::new(
                                Code::ResourceExhausted,
                                format!("a message over the {MAX_MESSAGE}-byte limit"),
                            ));
                        }
                        self.buf.extend_from_slice(&d);
                    }
                    Err(f) => {
                        let Ok(trailers) = f.into_trailers() else {
                            continue;
                        };
                        match status_of(&trailers) {
                            None => {
                                return Err(Status::internal("trailers without a grpc-status"));
                            }
                            Some(r) => r?,
                        }
                        if !self.buf.is_empty() && unframe(&self.buf)?.is_none() {
                            return Err(Status::internal("the call ended inside a message"));
                        }
                        self.ended = true;
                    }
                },
            }
        }
    }
}
