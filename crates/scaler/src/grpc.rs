//! gRPC on tonic: KEDA's service served over HTTP/2 (cleartext with prior knowledge, as KEDA
//! dials by default, or TLS with ALPN `h2` from PEM files through rustls), and clients of it
//! for tests and probes.
//!
//! Limits: a message of at most [`MAX_MESSAGE`] bytes either way, 256 concurrent calls on a
//! connection, 16 KiB of request headers, a TLS handshake within 10 s. `grpc-timeout` is
//! honoured by tonic.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tonic::transport::{Channel, Endpoint};

pub use tonic::{Code, Status};

use crate::proto::external_scaler_client::ExternalScalerClient;
use crate::proto::external_scaler_server::{ExternalScaler, ExternalScalerServer};

/// The largest message accepted either way (gRPC's default receive limit).
pub const MAX_MESSAGE: usize = 4 << 20;

/// How long a TLS client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of the scaler's gRPC service.
pub type Client = ExternalScalerClient<Channel>;

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

/// A connection the server accepted: plain TCP or TLS over it.
enum Conn {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Accepts on `listener` until `shutdown` turns true, handing on each connection once it is
/// ready (a TLS one after its handshake, which runs in its own task so a slow client holds
/// up no one).
fn accept(
    listener: TcpListener,
    tls: Option<Tls>,
    mut shutdown: watch::Receiver<bool>,
) -> ReceiverStream<std::io::Result<Conn>> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = async { drop(shutdown.wait_for(|s| *s).await) } => return,
            };
            // A failed accept (the peer gone already, out of descriptors) ends no one else.
            let Ok((stream, _)) = accepted else { continue };
            let _ = stream.set_nodelay(true);
            match &tls {
                None => {
                    if tx.send(Ok(Conn::Plain(stream))).await.is_err() {
                        return;
                    }
                }
                Some(Tls(acceptor)) => {
                    let (acceptor, tx) = (acceptor.clone(), tx.clone());
                    tokio::spawn(async move {
                        if let Ok(Ok(s)) =
                            tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        {
                            let _ = tx.send(Ok(Conn::Tls(Box::new(s)))).await;
                        }
                    });
                }
            }
        }
    });
    ReceiverStream::new(rx)
}

/// Serves `service` on `listener` (over TLS when `tls` is given) until `shutdown` turns
/// true; calls in flight finish.
///
/// # Errors
///
/// When the server itself fails (not a single connection or call).
pub async fn serve<S: ExternalScaler>(
    service: S,
    listener: TcpListener,
    tls: Option<Tls>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    let service = ExternalScalerServer::new(service)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let mut stop = shutdown.clone();
    tonic::transport::Server::builder()
        .max_concurrent_streams(256)
        .http2_max_header_list_size(16 << 10)
        .add_service(service)
        .serve_with_incoming_shutdown(accept(listener, tls, shutdown), async move {
            drop(stop.wait_for(|s| *s).await);
        })
        .await
}

/// Why a client could not reach the scaler.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address is not `host:port`.
    #[error("{addr:?}: not a host:port address")]
    Address {
        /// The address given.
        addr: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
    /// The TLS server name is not a DNS name or an IP address.
    #[error("{name:?}: not a server name for TLS")]
    ServerName {
        /// The name given.
        name: String,
    },
    /// The connection or its HTTP/2 handshake failed.
    #[error("cannot reach the scaler at {addr}")]
    Unreachable {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: tonic::transport::Error,
    },
}

fn endpoint(addr: &str) -> Result<Endpoint, ConnectError> {
    Endpoint::from_shared(format!("http://{addr}")).map_err(|source| ConnectError::Address {
        addr: addr.to_owned(),
        source,
    })
}

/// A client of the scaler at `addr` (`host:port`), in cleartext (h2c with prior knowledge,
/// as KEDA's `scalerAddress` without `enableTLS`), each call given at most `timeout`.
///
/// # Errors
///
/// A bad address, or no HTTP/2 server there.
pub async fn connect(addr: &str, timeout: Option<Duration>) -> Result<Client, ConnectError> {
    let mut e = endpoint(addr)?.connect_timeout(Duration::from_secs(10));
    if let Some(t) = timeout {
        e = e.timeout(t);
    }
    let channel = e.connect().await.map_err(unreachable(addr))?;
    Ok(Client::new(channel))
}

/// A client of the scaler at `addr` over TLS, checking its certificate against `config`'s
/// roots for `server_name`.
///
/// # Errors
///
/// A bad address or server name, no server there, or a failed handshake.
pub async fn connect_tls(
    addr: &str,
    server_name: &str,
    config: Arc<rustls::ClientConfig>,
) -> Result<Client, ConnectError> {
    let mut config = (*config).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned()).map_err(|_| {
        ConnectError::ServerName {
            name: server_name.to_owned(),
        }
    })?;
    let target = addr.to_owned();
    // The URI says http: the TLS is this connector's, not tonic's.
    let dial = tower::service_fn(move |_: http::Uri| {
        let (connector, name, target) = (connector.clone(), name.clone(), target.clone());
        async move {
            let tcp = TcpStream::connect(&target).await?;
            let _ = tcp.set_nodelay(true);
            let tls = connector.connect(name, tcp).await?;
            Ok::<_, std::io::Error>(TokioIo::new(tls))
        }
    });
    let channel = endpoint(addr)?
        .connect_timeout(Duration::from_secs(10))
        .connect_with_connector(dial)
        .await
        .map_err(unreachable(addr))?;
    Ok(Client::new(channel))
}

/// No scaler answered at `addr`.
fn unreachable(addr: &str) -> impl FnOnce(tonic::transport::Error) -> ConnectError + '_ {
    move |source| ConnectError::Unreachable {
        addr: addr.to_owned(),
        source,
    }
}
