//! The gRPC server: HTTP/2 (cleartext with prior knowledge, as KEDA dials by default, or TLS
//! with ALPN `h2`), one task per connection, a request's message bounded by
//! [`MAX_MESSAGE`](super::MAX_MESSAGE), `grpc-timeout` honoured.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::body::{GrpcBody, status_headers};
use super::{Code, MAX_MESSAGE, Reply, Service, Status, parse_timeout, unframe};

/// How long a TLS client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS for the gRPC port: a certificate chain and its key, from PEM files.
#[derive(Clone)]
pub struct Tls(tokio_rustls::TlsAcceptor);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(..)")
    }
}

/// Why TLS cannot be set up from the files given; each names its file.
#[derive(Debug, thiserror::Error)]
pub enum TlsFileError {
    /// A file could not be read.
    #[error("{}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate file is not PEM.
    #[error("{}: not a PEM certificate file", path.display())]
    NotPem {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{}: no certificate in it (expected -----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate {
        /// The file.
        path: std::path::PathBuf,
    },
    /// The key file holds no private key.
    #[error(
        "{}: no private key in it (expected -----BEGIN PRIVATE KEY----- or an RSA/EC key)",
        path.display()
    )]
    NoKey {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// rustls refused the configuration (the key does not go with the certificate, or no
    /// protocol version is left).
    #[error("{} and {}: the key does not go with the certificate", cert.display(), key.display())]
    Mismatch {
        /// The certificate file.
        cert: std::path::PathBuf,
        /// The key file.
        key: std::path::PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// TLS cannot be set up at all with this build's provider.
    #[error("TLS cannot be set up")]
    Setup(#[source] rustls::Error),
}

impl Tls {
    /// Reads `cert` (a PEM chain, leaf first) and `key` (a PEM private key).
    ///
    /// # Errors
    ///
    /// Naming the file and what was expected.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls, TlsFileError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| TlsFileError::Read {
                path: p.to_owned(),
                source,
            })
        };
        let (cert_pem, key_pem) = (read(cert)?, read(key)?);
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|source| TlsFileError::NotPem {
                path: cert.to_owned(),
                source,
            })?;
        if chain.is_empty() {
            return Err(TlsFileError::NoCertificate {
                path: cert.to_owned(),
            });
        }
        let key_der =
            PrivateKeyDer::from_pem_slice(&key_pem).map_err(|source| TlsFileError::NoKey {
                path: key.to_owned(),
                source,
            })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsFileError::Setup)?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|source| TlsFileError::Mismatch {
                cert: cert.to_owned(),
                key: key.to_owned(),
                source,
            })?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Tls(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
    }
}

/// A gRPC server for one service.
#[derive(Clone)]
pub struct Server {
    service: Arc<dyn Service>,
    tls: Option<Tls>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("service", &self.service.name())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Server {
    /// Serves `service`, in cleartext unless [`Server::tls`] is given.
    pub fn new(service: impl Service) -> Server {
        Server {
            service: Arc::new(service),
            tls: None,
        }
    }

    /// Serves over TLS.
    pub fn tls(mut self, tls: Option<Tls>) -> Server {
        self.tls = tls;
        self
    }

    /// Accepts connections on `listener` until `shutdown` turns true; connections in flight
    /// are closed gracefully (their calls finish).
    pub async fn serve(self, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = async { drop(shutdown.wait_for(|s| *s).await) } => break,
            };
            let Ok((stream, _)) = accepted else { continue };
            let _ = stream.set_nodelay(true);
            let (service, stop) = (Arc::clone(&self.service), shutdown.clone());
            match self.tls.clone() {
                None => {
                    tokio::spawn(connection(stream, service, stop));
                }
                Some(Tls(acceptor)) => {
                    tokio::spawn(async move {
                        let Ok(Ok(tls)) =
                            tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        else {
                            return;
                        };
                        connection(tls, service, stop).await;
                    });
                }
            }
        }
    }
}

async fn connection<I>(io: I, service: Arc<dyn Service>, mut stop: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let service = Arc::clone(&service);
        async move { Ok::<_, Infallible>(call(req, service).await) }
    });
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .max_concurrent_streams(256)
        .max_header_list_size(16 << 10)
        .serve_connection(TokioIo::new(io), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = async { drop(stop.wait_for(|s| *s).await) } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

fn http_error(status: StatusCode) -> Response<GrpcBody> {
    let mut r = Response::new(GrpcBody::Empty);
    *r.status_mut() = status;
    r
}

/// A response carrying only a status (gRPC's trailers-only form).
fn trailers_only(status: &Status) -> Response<GrpcBody> {
    let mut r = Response::new(GrpcBody::Empty);
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.extend(status_headers(Some(status)));
    r
}

fn grpc_response(body: GrpcBody) -> Response<GrpcBody> {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    r
}

async fn call(req: Request<Incoming>, service: Arc<dyn Service>) -> Response<GrpcBody> {
    if req.method() != Method::POST {
        return http_error(StatusCode::METHOD_NOT_ALLOWED);
    }
    let grpc = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if !grpc {
        return http_error(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let path = req.uri().path().to_owned();
    let Some((svc, method)) = path.strip_prefix('/').and_then(|p| p.split_once('/')) else {
        return trailers_only(&Status::unimplemented(format!("no method at {path:?}")));
    };
    if svc != service.name() {
        return trailers_only(&Status::unimplemented(format!(
            "unknown service {svc:?} (this server has {})",
            service.name()
        )));
    }
    let timeout = req
        .headers()
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_timeout);
    let body = match Limited::new(req.into_body(), MAX_MESSAGE + 5)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return trailers_only(&Status::new(
                Code::ResourceExhausted,
                format!("the request could not be read whole (limit {MAX_MESSAGE} bytes): {e}"),
            ));
        }
    };
    let message = match unframe(&body) {
        Ok(Some((m, used))) if used == body.len() => body.slice_ref(m),
        Ok(Some(_)) => {
            return trailers_only(&Status::unimplemented(
                "more than one request message (client streaming is not served)",
            ));
        }
        Ok(None) => {
            return trailers_only(&Status::internal(
                "the request ended inside its message frame",
            ));
        }
        Err(s) => return trailers_only(&s),
    };
    let reply = service.call(method, message);
    let reply = match timeout {
        None => reply.await,
        Some(t) => match tokio::time::timeout(t, reply).await {
            Ok(r) => r,
            Err(_) => {
                return trailers_only(&Status::new(
                    Code::DeadlineExceeded,
                    format!("no answer within the caller's {} ms", t.as_millis()),
                ));
            }
        },
    };
    match reply {
        Reply::Unary(Ok(m)) => grpc_response(GrpcBody::one(&m)),
        Reply::Unary(Err(s)) => trailers_only(&s),
        Reply::Stream(messages) => grpc_response(GrpcBody::Stream {
            messages,
            done: false,
        }),
    }
}
