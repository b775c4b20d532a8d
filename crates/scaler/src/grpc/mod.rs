//! gRPC over HTTP/2, the part a KEDA external scaler needs: unary and server-streaming
//! calls, identity encoding, status codes and messages in trailers, `grpc-timeout`.
//!
//! The messages, the server trait and the client come from `proto/externalscaler.proto`
//! through `build.rs` ([`crate::proto`]); this module is what they run on: the protobuf
//! encoding ([`wire`]), the length-prefixed message framing, the server ([`Server`]) and the
//! client ([`Channel`]), both over hyper's HTTP/2.

pub mod wire;

mod body;
mod client;
mod server;

use std::future::Future;
use std::pin::Pin;

use tokio::sync::mpsc;

pub use client::{Channel, Streaming};
pub use server::{Server, Tls, TlsFileError};
use wire::{DecodeError, Reader, WireType, Writer};

/// The largest message accepted either way (gRPC's default receive limit).
pub const MAX_MESSAGE: usize = 4 << 20;

/// A protobuf message; the generated types implement it.
pub trait Message: Default + Send + 'static {
    /// Writes the fields that are not at their default.
    fn encode(&self, w: &mut Writer);

    /// Reads one field (unknown numbers are skipped).
    fn merge_field(
        &mut self,
        number: u32,
        wire: WireType,
        r: &mut Reader<'_>,
    ) -> Result<(), DecodeError>;

    /// Reads `buf`'s fields into `self`.
    fn merge(&mut self, buf: &[u8]) -> Result<(), DecodeError> {
        let mut r = Reader::new(buf);
        while !r.is_empty() {
            let (n, w) = r.key()?;
            self.merge_field(n, w, &mut r)?;
        }
        Ok(())
    }

    /// The message in `buf`.
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        m.merge(buf)?;
        Ok(m)
    }

    /// The message's bytes.
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        self.encode(&mut w);
        w.into_bytes()
    }
}

/// gRPC's status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    /// The code a `grpc-status` number stands for (an unknown number is `Unknown`).
    pub fn from_number(n: u32) -> Code {
        use Code::*;
        const ALL: [Code; 17] = [
            Ok,
            Cancelled,
            Unknown,
            InvalidArgument,
            DeadlineExceeded,
            NotFound,
            AlreadyExists,
            PermissionDenied,
            ResourceExhausted,
            FailedPrecondition,
            Aborted,
            OutOfRange,
            Unimplemented,
            Internal,
            Unavailable,
            DataLoss,
            Unauthenticated,
        ];
        ALL.get(n as usize).copied().unwrap_or(Unknown)
    }
}

/// A call's outcome other than success: a code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct Status {
    /// What kind of failure.
    pub code: Code,
    /// What went wrong, for the operator reading KEDA's events.
    pub message: String,
}

impl Status {
    /// A status with `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }

    /// The request is wrong (a bad `scalerMetadata` key, an undecodable message).
    pub fn invalid_argument(message: impl Into<String>) -> Status {
        Status::new(Code::InvalidArgument, message)
    }

    /// No such method.
    pub fn unimplemented(message: impl Into<String>) -> Status {
        Status::new(Code::Unimplemented, message)
    }

    /// The value cannot be had now (no pods, none answering); KEDA's fallback engages.
    pub fn unavailable(message: impl Into<String>) -> Status {
        Status::new(Code::Unavailable, message)
    }

    /// A failure of the scaler itself or of the peer's protocol.
    pub fn internal(message: impl Into<String>) -> Status {
        Status::new(Code::Internal, message)
    }
}

/// What a server-streaming method hands back: its messages, ended by dropping the sender
/// (status OK) or by sending an error (that status, then the end).
pub type ServerStream<T> = mpsc::Receiver<Result<T, Status>>;

/// A method's answer, encoded.
#[derive(Debug)]
pub enum Reply {
    /// One message or a status.
    Unary(Result<Vec<u8>, Status>),
    /// Messages until the channel ends.
    Stream(mpsc::Receiver<Result<Vec<u8>, Status>>),
}

impl Reply {
    /// A unary method's answer.
    pub fn unary<M: Message>(r: Result<M, Status>) -> Reply {
        Reply::Unary(r.map(|m| m.to_bytes()))
    }

    /// A server-streaming method's answer; it ends when the client goes away.
    pub fn stream<M: Message>(r: Result<ServerStream<M>, Status>) -> Reply {
        match r {
            Err(s) => Reply::Unary(Err(s)),
            Ok(mut messages) => {
                let (tx, rx) = mpsc::channel(4);
                tokio::spawn(async move {
                    while let Some(m) = messages.recv().await {
                        if tx.send(m.map(|m| m.to_bytes())).await.is_err() {
                            break;
                        }
                    }
                });
                Reply::Stream(rx)
            }
        }
    }
}

/// A gRPC service as the server sees it: a name and a method router. The generated
/// `Routes` types implement it.
pub trait Service: Send + Sync + 'static {
    /// The full name (`package.Service`).
    fn name(&self) -> &'static str;
    /// Runs `method` on a request's bytes.
    fn call(&self, method: &str, body: bytes::Bytes)
    -> Pin<Box<dyn Future<Output = Reply> + Send>>;
}

/// `grpc-message` is percent-encoded: bytes outside printable ASCII, and `%`.
fn encode_message(m: &str) -> String {
    let mut s = String::with_capacity(m.len());
    for b in m.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

fn decode_message(m: &[u8]) -> String {
    let mut out = Vec::with_capacity(m.len());
    let mut i = 0;
    while i < m.len() {
        if m[i] == b'%'
            && i + 2 < m.len()
            && let Some(b) = std::str::from_utf8(&m[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(m[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One length-prefixed message: a compressed flag (always 0 here) and a big-endian length.
fn frame(message: &[u8]) -> bytes::Bytes {
    let mut b = Vec::with_capacity(5 + message.len());
    b.push(0);
    b.extend_from_slice(&(message.len() as u32).to_be_bytes());
    b.extend_from_slice(message);
    b.into()
}

/// Splits the first message off `buf`: `Ok(None)` when more bytes are needed.
fn unframe(buf: &[u8]) -> Result<Option<(&[u8], usize)>, Status> {
    if buf.len() < 5 {
        return Ok(None);
    }
    if buf[0] != 0 {
        return Err(Status::unimplemented(
            "compressed messages are not supported (send grpc-encoding: identity)",
        ));
    }
    let n = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if n > MAX_MESSAGE {
        return Err(Status::new(
            Code::ResourceExhausted,
            format!("a message of {n} bytes, over the {MAX_MESSAGE}-byte limit"),
        ));
    }
    if buf.len() < 5 + n {
        return Ok(None);
    }
    Ok(Some((&buf[5..5 + n], 5 + n)))
}

/// A `grpc-timeout` header: digits and a unit (H, M, S, m, u, n).
fn parse_timeout(v: &str) -> Option<std::time::Duration> {
    use std::time::Duration;
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (digits, unit) = v.split_at(v.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_survive_percent_encoding() {
        for m in ["plain", "100% sure", "scalerMetadata.target: «x»\nline"] {
            let e = encode_message(m);
            assert!(e.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{e}");
            assert_eq!(decode_message(e.as_bytes()), m);
        }
        // A stray % is kept as it came.
        assert_eq!(decode_message(b"50%"), "50%");
    }

    #[test]
    fn frames_split_at_their_length() {
        let mut b = frame(b"abc").to_vec();
        b.extend_from_slice(&frame(b""));
        let Ok(Some((m, used))) = unframe(&b) else {
            panic!("no frame in {b:?}")
        };
        assert_eq!((m, used), (&b"abc"[..], 8));
        assert!(matches!(unframe(&b[used..]), Ok(Some((m, 5))) if m.is_empty()));
        assert!(matches!(unframe(&b[..7]), Ok(None)));
        let compressed = [1u8, 0, 0, 0, 0];
        assert_eq!(
            unframe(&compressed).map(|_| ()).map_err(|s| s.code),
            Err(Code::Unimplemented)
        );
    }

    #[test]
    fn timeouts_read_every_unit_and_refuse_the_rest() {
        use std::time::Duration;
        assert_eq!(parse_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_timeout("7n"), Some(Duration::from_nanos(7)));
        assert_eq!(parse_timeout("S"), None);
        assert_eq!(parse_timeout("5s"), None);
        assert_eq!(parse_timeout("123456789S"), None);
    }
}
