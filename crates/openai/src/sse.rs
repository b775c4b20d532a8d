//! An incremental decoder for `text/event-stream` bodies.
//!
//! Bytes arrive in whatever pieces the network delivers: an event can be split across reads,
//! and one read can carry several events. [`SseDecoder::feed`] takes each piece as it comes
//! and hands back the complete events, keeping the unfinished tail for the next call. Lines
//! may end in `\n`, `\r\n` or `\r`; comments (`:`) and fields other than `data` are skipped;
//! several `data:` lines of one event are joined with `\n`, as the HTML standard says.

/// One complete event's `data` payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The data lines joined with `\n` (without the trailing newline).
    pub data: String,
}

impl SseEvent {
    /// Whether this is OpenAI's end-of-stream marker, `data: [DONE]`.
    pub fn is_done(&self) -> bool {
        self.data == "[DONE]"
    }
}

/// Why a stream could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// A line was longer than the decoder's limit.
    LineTooLong(usize),
    /// A data line was not valid UTF-8.
    InvalidUtf8,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::LineTooLong(n) => write!(f, "an event line is longer than {n} bytes"),
            SseError::InvalidUtf8 => f.write_str("an event's data is not valid UTF-8"),
        }
    }
}

impl std::error::Error for SseError {}

/// The incremental decoder. See the module documentation.
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    data: Option<String>,
    max_line: usize,
    /// A `\r` ended the last piece: a `\n` starting the next one belongs to it.
    pending_cr: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new(1 << 20)
    }
}

impl SseDecoder {
    /// A decoder that refuses lines longer than `max_line` bytes (a malicious or broken server
    /// cannot make it buffer without bound).
    pub fn new(max_line: usize) -> Self {
        SseDecoder {
            buf: Vec::new(),
            data: None,
            max_line,
            pending_cr: false,
        }
    }

    /// Feeds the next piece of the body; complete events are appended to `out`.
    ///
    /// ```
    /// use inferscale_openai::SseDecoder;
    /// let mut d = SseDecoder::default();
    /// let mut events = Vec::new();
    /// d.feed(b"data: {\"a\"", &mut events).unwrap();
    /// assert!(events.is_empty());
    /// d.feed(b":1}\n\ndata: [DONE]\n\n", &mut events).unwrap();
    /// assert_eq!(events[0].data, "{\"a\":1}");
    /// assert!(events[1].is_done());
    /// ```
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.pending_cr {
            self.pending_cr = false;
            if let Some(b'\n') = bytes.first() {
                bytes = &bytes[1..];
            }
        }
        while let Some(i) = memchr::memchr2(b'\n', b'\r', bytes) {
            let (line, rest) = bytes.split_at(i);
            let cr = rest[0] == b'\r';
            bytes = &rest[1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    None => self.pending_cr = true,
                    _ => {}
                }
            }
            if self.buf.is_empty() {
                self.line(line, out)?;
            } else {
                let mut full = std::mem::take(&mut self.buf);
                full.extend_from_slice(line);
                let r = self.line(&full, out);
                full.clear();
                self.buf = full;
                r?;
            }
        }
        if self.buf.len() + bytes.len() > self.max_line {
            return Err(SseError::LineTooLong(self.max_line));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Ends the stream: an event not yet closed by a blank line is dispatched (servers that
    /// close right after their last `data:` line are tolerated).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line(&line, out)?;
        }
        if let Some(data) = self.data.take() {
            out.push(SseEvent { data });
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(SseEvent { data });
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field != b"data" {
            return Ok(());
        }
        let value = std::str::from_utf8(value).map_err(|_| SseError::InvalidUtf8)?;
        match &mut self.data {
            Some(d) => {
                d.push('\n');
                d.push_str(value);
            }
            None => self.data = Some(value.to_owned()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(pieces: &[&[u8]]) -> Vec<String> {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for p in pieces {
            d.feed(p, &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        out.into_iter().map(|e| e.data).collect()
    }

    #[test]
    fn fields_comments_and_line_endings() {
        let body =
            b": keep-alive\r\nevent: x\r\nid: 7\r\ndata: a\r\ndata:b\r\n\r\ndata: c\rdata: d\r\r";
        assert_eq!(decode_all(&[body]), vec!["a\nb", "c\nd"]);
    }

    #[test]
    fn a_carriage_return_at_the_end_of_a_piece() {
        assert_eq!(
            decode_all(&[b"data: a\r", b"\n\r", b"\ndata: b\n\n"]),
            vec!["a", "b"]
        );
    }

    #[test]
    fn an_unterminated_last_event_is_kept() {
        assert_eq!(decode_all(&[b"data: a\n\ndata: b"]), vec!["a", "b"]);
    }

    #[test]
    fn long_lines_are_refused() {
        let mut d = SseDecoder::new(8);
        let mut out = Vec::new();
        assert_eq!(
            d.feed(b"data: 0123456789", &mut out),
            Err(SseError::LineTooLong(8))
        );
    }

    proptest! {
        /// However a stream is cut into pieces, the same events come out.
        #[test]
        fn any_split_gives_the_same_events(
            events in proptest::collection::vec("[a-z0-9{}\":, ]{0,20}", 0..8),
            cuts in proptest::collection::vec(0usize..400, 0..12),
            crlf in any::<bool>(),
        ) {
            let nl = if crlf { "\r\n" } else { "\n" };
            let body: String = events.iter().map(|e| format!("data: {e}{nl}{nl}")).collect();
            let bytes = body.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut last = 0;
            for c in cuts {
                pieces.push(&bytes[last..c]);
                last = c;
            }
            pieces.push(&bytes[last..]);
            prop_assert_eq!(decode_all(&pieces), events);
        }
    }
}
