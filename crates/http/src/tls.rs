//! TLS for `https://` targets: rustls with the ring provider, HTTP/1.1 over it.
//!
//! By default a server's certificate is checked against the Mozilla root store (compiled in,
//! so a scratch container needs no CA bundle). `--ca-file` trusts a private CA instead, as
//! clusters with their own issuer need; `--insecure` checks nothing, and every command that
//! takes it says so in its output.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TLS client configuration, shared by every connection to one server.
pub type TlsConfig = Arc<rustls::ClientConfig>;

/// How certificates are checked.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// Trust only these CA certificates (PEM text) instead of the Mozilla roots, with the
    /// name of the file they came from for messages.
    pub ca_pem: Option<(String, Vec<u8>)>,
    /// Check nothing (a self-signed test server). Said aloud by every command that allows it.
    pub insecure: bool,
}

/// Why a TLS client configuration could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The CA file holds no certificate.
    #[error("{file}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)")]
    NoCertificate {
        /// The CA file.
        file: String,
    },
    /// The CA file is not PEM.
    #[error("{file}: not a PEM certificate file")]
    Pem {
        /// The CA file.
        file: String,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate rustls refuses as a trust anchor.
    #[error("{file}: a certificate that cannot be a trust anchor")]
    Anchor {
        /// The CA file.
        file: String,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// The provider refused the protocol versions (a build problem).
    #[error("TLS cannot be set up")]
    Setup(#[source] rustls::Error),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls client configuration for `options`.
pub fn client_config(options: &TlsOptions) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?;
    let mut config = if options.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &options.ca_pem {
            Some((file, pem)) => {
                let mut n = 0;
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|source| TlsError::Pem {
                        file: file.clone(),
                        source,
                    })?;
                    roots.add(cert).map_err(|source| TlsError::Anchor {
                        file: file.clone(),
                        source,
                    })?;
                    n += 1;
                }
                if n == 0 {
                    return Err(TlsError::NoCertificate { file: file.clone() });
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The configuration `https://` targets get when no other was given: the Mozilla roots.
pub fn default_config() -> Result<Arc<rustls::ClientConfig>, TlsError> {
    static DEFAULT: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    if let Some(c) = DEFAULT.get() {
        return Ok(Arc::clone(c));
    }
    let c = client_config(&TlsOptions::default())?;
    Ok(Arc::clone(DEFAULT.get_or_init(|| c)))
}

/// `--insecure`: accepts any certificate, but still checks that the handshake's signatures
/// are valid for the certificate presented.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A connection, plain or encrypted.
pub(crate) enum Stream {
    /// `http://`.
    Plain(TcpStream),
    /// `https://`.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// Connects to `host:port`, with TLS when `tls` is given (the host is the name checked
/// against the certificate).
pub(crate) async fn connect(
    host: &str,
    port: u16,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> io::Result<Stream> {
    let tcp = TcpStream::connect((host, port)).await?;
    let _ = tcp.set_nodelay(true);
    let Some(config) = tls else {
        return Ok(Stream::Plain(tcp));
    };
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a valid TLS server name"))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
        .connect(name, tcp)
        .await?;
    Ok(Stream::Tls(Box::new(tls)))
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}
