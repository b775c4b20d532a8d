//! HTTP/1.1 on one connection, written and read in place: the request path of a load run.
//!
//! A load run sends tens of thousands of small requests a second from one thread. A general
//! client (a task driving each connection, a channel between the request and that task, a
//! header map per message) costs more than the exchange itself, so the load path writes each
//! request as one buffer and parses the response where it was read: the status and headers
//! with `httparse`, then a body framed by `Content-Length`, by chunked transfer coding, or by
//! the end of the connection. One-off `GET`s (scrapes, discovery) keep using `hyper`.
//!
//! Liberal in what it reads: `1xx` interim responses are skipped, chunk extensions and
//! trailers are ignored, header names are matched without regard to case, and HTTP/1.0 and
//! `Connection: close` answers are read to their end (the connection is then not reused).
//! What is refused is named: a head over [`MAX_HEAD`], a chunk-size line that is not hex, two
//! different `Content-Length`s, a connection closed mid-message.

use std::io;
use std::pin::Pin;
use std::task::{Context, Waker};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// The most a response head (status line and headers) may take.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most a chunk-size line or a trailer line may take.
const MAX_LINE: usize = 4096;
/// Headers a response head may have.
const MAX_HEADERS: usize = 100;
/// Bytes read from the socket at a time.
const READ_SIZE: usize = 16 * 1024;

/// How a response body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length: N`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body runs to the end of the connection.
    ToClose,
}

/// A response's status line and the headers that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// How the body is framed.
    pub framing: Framing,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// Why a response could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The connection ended before the message did.
    #[error("the connection closed {0}")]
    Closed(&'static str),
    /// The response is not HTTP/1.x as this reader accepts it.
    #[error("malformed response: {0}")]
    Malformed(String),
}

/// One connection and what has been read from it but not yet used.
pub struct Wire<S> {
    io: S,
    buf: Vec<u8>,
    /// Unused bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// The request being written (kept to reuse its allocation).
    out: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    /// Wraps a connected stream.
    pub fn new(io: S) -> Wire<S> {
        Wire {
            io,
            buf: vec![0; READ_SIZE],
            start: 0,
            end: 0,
            out: Vec::new(),
        }
    }

    /// Whether an idle connection can take a request: the server has neither closed it nor
    /// sent anything unasked (either makes it unusable). Never waits.
    pub fn usable(&mut self) -> bool {
        if self.start != self.end {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut probe = [0u8; 1];
        let mut rb = ReadBuf::new(&mut probe);
        // Ready means closed, failed, or bytes nobody asked for.
        Pin::new(&mut self.io)
            .poll_read(&mut cx, &mut rb)
            .is_pending()
    }

    /// Writes one request as one buffer: `fill` puts the whole message into it (the buffer
    /// is the connection's, reused from request to request).
    pub async fn send(&mut self, fill: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        self.out.clear();
        fill(&mut self.out);
        self.io.write_all(&self.out).await?;
        self.io.flush().await
    }

    /// Reads more bytes; `false` at the end of the connection.
    async fn fill(&mut self) -> io::Result<bool> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = self.io.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n > 0)
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Reads a response head, skipping interim (`1xx`) responses.
    pub async fn head(&mut self) -> Result<Head, WireError> {
        loop {
            // Parsed outside any wait: the parser's header slots (kilobytes) then never
            // become part of this future, which every request's task carries and moves.
            let Some((head, len)) = parse_head(self.unread())? else {
                if self.end - self.start > MAX_HEAD {
                    return Err(WireError::Malformed(format!(
                        "the response head is over {MAX_HEAD} bytes"
                    )));
                }
                if !self.fill().await? {
                    return Err(WireError::Closed(if self.start == self.end {
                        "before the response"
                    } else {
                        "in the middle of the response head"
                    }));
                }
                continue;
            };
            self.start += len;
            if (100..200).contains(&head.status) && head.status != 101 {
                continue;
            }
            return Ok(head);
        }
    }

    /// Hands the next `left` bytes to `data` as they arrive; the connection closing first is
    /// an error that says where (`what`).
    async fn exactly<E>(
        &mut self,
        mut left: u64,
        what: &'static str,
        data: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<Result<(), E>, WireError> {
        while left > 0 {
            if self.start == self.end && !self.fill().await? {
                return Err(WireError::Closed(what));
            }
            let take = (self.end - self.start).min(usize::try_from(left).unwrap_or(usize::MAX));
            let piece = self.start..self.start + take;
            self.start += take;
            left -= take as u64;
            if let Err(e) = data(&self.buf[piece]) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Reads a body framed by `framing`, handing each piece to `data` as it arrives. Returns
    /// whether the connection is at a message boundary (and so reusable).
    pub async fn body<E>(
        &mut self,
        framing: Framing,
        mut data: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<Result<bool, E>, WireError> {
        match framing {
            Framing::Length(left) => Ok(self
                .exactly(left, "in the middle of the response body", &mut data)
                .await?
                .map(|()| true)),
            Framing::ToClose => loop {
                if self.start != self.end {
                    let piece = self.start..self.end;
                    self.start = self.end;
                    if let Err(e) = data(&self.buf[piece]) {
                        return Ok(Err(e));
                    }
                }
                if !self.fill().await? {
                    return Ok(Ok(false));
                }
            },
            Framing::Chunked => loop {
                let line = self.line().await?;
                let size = chunk_size(&line)?;
                if size == 0 {
                    // Trailers, up to the empty line.
                    while !self.line().await?.is_empty() {}
                    return Ok(Ok(true));
                }
                if let Err(e) = self
                    .exactly(size, "in the middle of a chunk", &mut data)
                    .await?
                {
                    return Ok(Err(e));
                }
                if !self.line().await?.is_empty() {
                    return Err(WireError::Malformed(
                        "a chunk is longer than its size says".into(),
                    ));
                }
            },
        }
    }

    /// The next line (without its line ending: CRLF, or a bare LF read liberally).
    async fn line(&mut self) -> Result<Vec<u8>, WireError> {
        loop {
            if let Some(i) = self.unread().iter().position(|b| *b == b'\n') {
                let mut line = self.buf[self.start..self.start + i].to_vec();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.start += i + 1;
                return Ok(line);
            }
            if self.end - self.start > MAX_LINE {
                return Err(WireError::Malformed(format!(
                    "a chunk-size or trailer line is over {MAX_LINE} bytes"
                )));
            }
            if !self.fill().await? {
                return Err(WireError::Closed("in the middle of a chunked body"));
            }
        }
    }
}

/// A whole response head at the start of `buf` and its length, or `None` while it is
/// incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, WireError> {
    // Uninitialised slots: filling a hundred empty headers first cost more than the parse.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut r, buf, &mut headers)
        .map_err(|e| WireError::Malformed(format!("in the response head: {e}")))?;
    let httparse::Status::Complete(len) = parsed else {
        return Ok(None);
    };
    let head = read_headers(r.code.unwrap_or(0), r.version.unwrap_or(1), r.headers)?;
    Ok(Some((head, len)))
}

/// A non-empty run of ASCII digits as a number (`None` for anything else, or past `u64`).
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        if d.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        } else {
            None
        }
    })
}

/// The size on a chunk-size line (extensions after `;` ignored).
fn chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let digits = line
        .split(|b| *b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let bad = || {
        WireError::Malformed(format!(
            "chunk size {:?} is not a hexadecimal number",
            String::from_utf8_lossy(line)
        ))
    };
    let text = std::str::from_utf8(digits).map_err(|_| bad())?;
    if text.is_empty() || text.len() > 15 {
        return Err(bad());
    }
    u64::from_str_radix(text, 16).map_err(|_| bad())
}

/// The framing and connection handling a response's headers ask for.
fn read_headers(
    status: u16,
    version: u8,
    headers: &[httparse::Header<'_>],
) -> Result<Head, WireError> {
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut close = version == 0;
    for h in headers {
        // Only the three headers that frame the message are looked at (the others are
        // not even decoded: this runs once per response).
        let framing = ["content-length", "transfer-encoding", "connection"]
            .iter()
            .any(|n| h.name.eq_ignore_ascii_case(n));
        if !framing {
            continue;
        }
        let value = h.value;
        if h.name.eq_ignore_ascii_case("content-length") {
            for part in value.split(|b| *b == b',') {
                let n = decimal(part.trim_ascii()).ok_or_else(|| {
                    WireError::Malformed(format!(
                        "Content-Length {:?} is not a number",
                        String::from_utf8_lossy(value)
                    ))
                })?;
                if length.is_some_and(|l| l != n) {
                    return Err(WireError::Malformed(
                        "two different Content-Length headers".into(),
                    ));
                }
                length = Some(n);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(|b| *b == b',')
                .next()
                .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(|b| *b == b',') {
                let t = token.trim_ascii();
                if t.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") && version == 0 {
                    close = false;
                }
            }
        }
    }
    // RFC 9112 6.3: no body for 1xx, 204 and 304; chunked wins over a length.
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::ToClose
    };
    Ok(Head {
        status,
        framing,
        close: close || framing == Framing::ToClose,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncWriteExt, duplex};

    /// Reads one response from `raw` (written in pieces of `piece` bytes) and returns its head,
    /// its body, and whether the connection was left reusable.
    async fn read(raw: &[u8], piece: usize) -> Result<(Head, Vec<u8>, bool), WireError> {
        let (client, mut server) = duplex(1 << 20);
        let raw = raw.to_vec();
        let writer = tokio::spawn(async move {
            for p in raw.chunks(piece.max(1)) {
                server.write_all(p).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut w = Wire::new(client);
        let head = w.head().await;
        let out = match head {
            Ok(h) => {
                let mut body = Vec::new();
                let reusable = w
                    .body(h.framing, |d| {
                        body.extend_from_slice(d);
                        Ok::<(), ()>(())
                    })
                    .await?
                    .unwrap();
                Ok((h, body, reusable))
            }
            Err(e) => Err(e),
        };
        writer.abort();
        out
    }

    #[tokio::test]
    async fn bodies_are_read_by_length_chunks_or_close_in_any_pieces() {
        let cases: [(&[u8], &[u8], Framing, bool); 4] = [
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                b"hello",
                Framing::Length(5),
                true,
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1\r\n!\r\n0\r\nT: 1\r\n\r\n",
                b"hello!",
                Framing::Chunked,
                true,
            ),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                b"ok",
                Framing::Length(2),
                true,
            ),
            (
                b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end",
                b"to the end",
                Framing::ToClose,
                false,
            ),
        ];
        for (raw, want, framing, reusable) in cases {
            for piece in [1, 3, 7, raw.len()] {
                let (h, body, r) = read(raw, piece).await.unwrap_or_else(|e| {
                    panic!(
                        "{:?} in pieces of {piece}: {e}",
                        String::from_utf8_lossy(raw)
                    )
                });
                assert_eq!(h.status, 200);
                assert_eq!(h.framing, framing);
                assert_eq!(body, want, "pieces of {piece}");
                // A to-the-end body is only known complete when the writer closes; the
                // duplex is closed when the writer task ends.
                assert_eq!(r, reusable);
            }
        }
    }

    #[tokio::test]
    async fn what_is_refused_is_named() {
        let cases: [(&[u8], &str); 5] = [
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                "not a hexadecimal",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
                "two different",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                "is not a number",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
                "closed in the middle of the response body",
            ),
            (b"SSH-2.0-OpenSSH\r\n\r\n", "malformed response"),
        ];
        for (raw, want) in cases {
            let e = read(raw, 4)
                .await
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                e.contains(want),
                "{:?}: {e:?} lacks {want:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[tokio::test]
    async fn a_closed_idle_connection_is_not_usable() {
        let (client, server) = duplex(1024);
        let mut w = Wire::new(client);
        assert!(w.usable());
        drop(server);
        assert!(!w.usable());
    }

    #[test]
    fn bodiless_statuses_have_no_body() {
        for status in [204, 304] {
            let h = read_headers(status, 1, &[]).unwrap();
            assert_eq!(h.framing, Framing::Length(0));
            assert!(!h.close);
        }
    }
}
