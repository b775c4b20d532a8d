//! Just enough JSON for a load run's responses: whether a body is one well-formed JSON
//! document, and the token counts of a completion, found without building a document.
//!
//! Every response of a load run is checked, tens of thousands a second on one thread. A
//! derived deserializer spent about a quarter of that thread's instructions on a 240-byte
//! completion (matching field names, reading the fields it then threw away); this reads the
//! document once, in place, with some 30 % fewer (valgrind's count, docs/benchmarks.md).
//!
//! What it accepts is what `serde_json` accepts (RFC 8259), which its tests check against
//! `serde_json` on generated and damaged documents. The differences: nesting deeper than
//! [`MAX_DEPTH`] is refused (it reads by recursion, so the depth is bounded); a number past
//! `f64`'s range is valid here; a key written with escapes (`"usag\u0065"`) is not taken
//! for the key it spells; and a completion's key given twice counts at its last value
//! (`serde_json`'s derived reader refused it).

/// How deep arrays and objects may nest (`serde_json`'s limit when it reads a document).
pub const MAX_DEPTH: usize = 128;

/// Why a body is not the JSON that was expected, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// The body is not UTF-8 (RFC 8259 8.1) from byte `at` of `len`.
    NotUtf8 {
        /// The first byte that is not.
        at: usize,
        /// The body's length.
        len: usize,
    },
    /// Something else stands where `expected` should.
    Expected {
        /// What should stand there.
        expected: &'static str,
        /// The byte it was looked for at.
        at: usize,
        /// What stands there, or `None` at the end of a body of `len` bytes.
        found: Option<char>,
        /// The body's length.
        len: usize,
    },
    /// Arrays and objects nest more than [`MAX_DEPTH`] deep at byte `at`.
    TooDeep {
        /// Where the limit was passed.
        at: usize,
    },
    /// A usage count is not a non-negative integer that fits in 64 bits.
    NotACount {
        /// Which count (`usage.completion_tokens`).
        field: &'static str,
        /// What it is instead.
        text: String,
    },
    /// A completion with no `choices`.
    NoChoices,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonError::NotUtf8 { at, len } => write!(f, "not UTF-8 at byte {at} of {len}"),
            JsonError::Expected {
                expected,
                at,
                found: Some(c),
                ..
            } => write!(f, "expected {expected} at byte {at}, found {c:?}"),
            JsonError::Expected {
                expected,
                found: None,
                len,
                ..
            } => write!(f, "expected {expected} at the end ({len} bytes)"),
            JsonError::TooDeep { at } => {
                write!(f, "nested more than {MAX_DEPTH} deep at byte {at}")
            }
            JsonError::NotACount { field, text } => write!(f, "{field} is {text}, not a count"),
            JsonError::NoChoices => f.write_str("missing field `choices`"),
        }
    }
}

impl std::error::Error for JsonError {}

/// A non-streaming completion's token counts, from its `usage` object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
}

/// Checks that `body` is one JSON document (surrounding whitespace allowed).
///
/// # Errors
///
/// Naming what was expected where it is not.
pub fn validate(body: &[u8]) -> Result<(), JsonError> {
    let mut r = Reader::new(body)?;
    r.value()?;
    r.end()
}

/// Reads a completion (or chat completion): a JSON object with a `choices` array and,
/// optionally, a `usage` object (or `null`) whose `prompt_tokens` and `completion_tokens`
/// are counts (or `null`). Returns the usage, `None` when there is none.
///
/// # Errors
///
/// When `body` is not such an object, naming what was expected where.
pub fn completion_usage(body: &[u8]) -> Result<Option<Usage>, JsonError> {
    let mut r = Reader::new(body)?;
    let mut usage = None;
    let mut choices = false;
    r.skip_ws();
    r.expect(b'{')?;
    r.members(|r, key| match key {
        b"choices" => {
            if r.peek() != Some(b'[') {
                return Err(r.wrong("`choices` to be an array"));
            }
            choices = true;
            r.value()
        }
        b"usage" if r.peek() == Some(b'n') => r.value(),
        b"usage" => {
            r.expect(b'{')?;
            let mut u = Usage::default();
            r.members(|r, key| match key {
                b"prompt_tokens" => {
                    u.prompt_tokens = r.count("usage.prompt_tokens")?;
                    Ok(())
                }
                b"completion_tokens" => {
                    u.completion_tokens = r.count("usage.completion_tokens")?;
                    Ok(())
                }
                _ => r.value(),
            })?;
            usage = Some(u);
            Ok(())
        }
        _ => r.value(),
    })?;
    r.end()?;
    if !choices {
        return Err(JsonError::NoChoices);
    }
    Ok(usage)
}

/// How many bytes at the start of `b` may stand in a string as they are: none is a quote, a
/// backslash or a control character. Eight bytes are looked at a time (most of a response
/// is such bytes, and this is where reading it spends its time).
fn plain(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is zero where the high bit of `zero(x)` is set (exact for the lowest such
    // byte, which is the one that is looked for).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let mut n = 0;
    for chunk in b.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let special = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
        if special != 0 {
            return n + (special.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + b[n..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .unwrap_or(b.len() - n)
}

/// A position in a document being read.
struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    /// A document must be UTF-8 (RFC 8259 8.1).
    fn new(b: &'a [u8]) -> Result<Reader<'a>, JsonError> {
        if let Err(e) = std::str::from_utf8(b) {
            return Err(JsonError::NotUtf8 {
                at: e.valid_up_to(),
                len: b.len(),
            });
        }
        Ok(Reader { b, i: 0, depth: 0 })
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// What went wrong, and where.
    #[cold]
    fn wrong(&self, expected: &'static str) -> JsonError {
        JsonError::Expected {
            expected,
            at: self.i,
            found: self.peek().map(char::from),
            len: self.b.len(),
        }
    }

    #[inline]
    fn expect(&mut self, c: u8) -> Result<(), JsonError> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.missing(c))
        }
    }

    #[cold]
    fn missing(&self, c: u8) -> JsonError {
        self.wrong(match c {
            b'{' => "'{'",
            b':' => "':'",
            _ => "a delimiter",
        })
    }

    /// Only whitespace may follow the document.
    fn end(&mut self) -> Result<(), JsonError> {
        self.skip_ws();
        if self.i == self.b.len() {
            Ok(())
        } else {
            Err(self.wrong("the end of the document"))
        }
    }

    /// Skips one value (and the whitespace before it).
    fn value(&mut self) -> Result<(), JsonError> {
        self.skip_ws();
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                self.members(|r, _| r.value())
            }
            Some(b'[') => {
                self.i += 1;
                self.deeper()?;
                self.skip_ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                } else {
                    loop {
                        self.value()?;
                        self.skip_ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.wrong("',' or ']'")),
                        }
                    }
                }
                self.depth -= 1;
                Ok(())
            }
            Some(b'"') => self.string().map(|_| ()),
            Some(b'-' | b'0'..=b'9') => self.number().map(|_| ()),
            Some(b't') => self.word("true"),
            Some(b'f') => self.word("false"),
            Some(b'n') => self.word("null"),
            _ => Err(self.wrong("a value")),
        }
    }

    fn deeper(&mut self) -> Result<(), JsonError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(JsonError::TooDeep { at: self.i });
        }
        Ok(())
    }

    /// An object's members after its `{`, through its `}`: `each` is given every key (its
    /// raw bytes) with the reader before the value, and must read the value.
    fn members(
        &mut self,
        mut each: impl FnMut(&mut Reader<'a>, &'a [u8]) -> Result<(), JsonError>,
    ) -> Result<(), JsonError> {
        self.deeper()?;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.wrong("a key"));
            }
            let key = self.string()?;
            self.skip_ws();
            self.expect(b':')?;
            self.skip_ws();
            each(self, key)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return Err(self.wrong("',' or '}'")),
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// A string from its opening quote; returns its raw contents (escapes not decoded).
    fn string(&mut self) -> Result<&'a [u8], JsonError> {
        self.i += 1;
        let start = self.i;
        loop {
            self.i += plain(&self.b[self.i..]);
            let Some(c) = self.peek() else {
                return Err(self.wrong("the end of a string"));
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok(&self.b[start..self.i - 1]);
                }
                b'\\' => {
                    self.i += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.i += 1;
                        }
                        Some(b'u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                if !self.peek().is_some_and(|h| h.is_ascii_hexdigit()) {
                                    return Err(self.wrong("a hexadecimal digit"));
                                }
                                self.i += 1;
                            }
                        }
                        _ => return Err(self.wrong("an escape")),
                    }
                }
                _ => return Err(self.wrong("no control character in a string")),
            }
        }
    }

    /// A number; returns whether it is a plain non-negative integer.
    fn number(&mut self) -> Result<bool, JsonError> {
        let mut integer = true;
        if self.peek() == Some(b'-') {
            self.i += 1;
            integer = false;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.wrong("a digit")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            integer = false;
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                return Err(self.wrong("a digit after '.'"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            integer = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                return Err(self.wrong("a digit in the exponent"));
            }
            self.digits();
        }
        Ok(integer)
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn word(&mut self, w: &'static str) -> Result<(), JsonError> {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(())
        } else {
            Err(self.wrong(w))
        }
    }

    /// A count (a non-negative integer that fits in 64 bits) or `null`.
    fn count(&mut self, field: &'static str) -> Result<Option<u64>, JsonError> {
        if self.peek() == Some(b'n') {
            self.word("null")?;
            return Ok(None);
        }
        let start = self.i;
        let integer = self.number()?;
        let text = &self.b[start..self.i];
        let n = integer
            .then(|| std::str::from_utf8(text).ok()?.parse::<u64>().ok())
            .flatten();
        match n {
            Some(n) => Ok(Some(n)),
            None => Err(JsonError::NotACount {
                field,
                text: String::from_utf8_lossy(text).into_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::de::IgnoredAny;

    /// Whether `serde_json` takes `b` for a document. A number past `f64`'s range is valid
    /// JSON that `serde_json` refuses (it reads every number); here it is accepted.
    fn serde_accepts(b: &[u8]) -> bool {
        let judged = match serde_json::from_slice::<IgnoredAny>(b) {
            Ok(_) => true,
            Err(e) => e.to_string().starts_with("number out of range"),
        };
        judged && std::str::from_utf8(b).is_ok()
    }

    #[test]
    fn a_completion_gives_its_usage() {
        let c = br#"{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":" ok","finish_reason":"length"}],"usage":{"prompt_tokens":34,"completion_tokens":1,"total_tokens":35}}"#;
        assert_eq!(
            completion_usage(c),
            Ok(Some(Usage {
                prompt_tokens: Some(34),
                completion_tokens: Some(1)
            }))
        );
        let chat = br#" {"choices":[{"message":{"role":"assistant","content":"hi"}}],
            "usage":{"completion_tokens":7}} "#;
        assert_eq!(
            completion_usage(chat),
            Ok(Some(Usage {
                prompt_tokens: None,
                completion_tokens: Some(7)
            }))
        );
        assert_eq!(completion_usage(br#"{"choices":[]}"#), Ok(None));
        assert_eq!(
            completion_usage(br#"{"choices":[],"usage":null}"#),
            Ok(None)
        );
        // Extra fields anywhere, and a key like "usage" deeper down, change nothing.
        let nested = br#"{"x":{"usage":{"completion_tokens":9}},"choices":[{"usage":1}]}"#;
        assert_eq!(completion_usage(nested), Ok(None));
        // A key given twice counts at its last value.
        let twice =
            br#"{"choices":[],"usage":{"completion_tokens":1},"usage":{"completion_tokens":2}}"#;
        assert_eq!(
            completion_usage(twice).map(|u| u.and_then(|u| u.completion_tokens)),
            Ok(Some(2))
        );
    }

    #[test]
    fn what_is_not_a_completion_is_named() {
        let cases: [(&[u8], &str); 8] = [
            (br#"{"usage":null}"#, "missing field `choices`"),
            (br#"{"choices":{}}"#, "`choices` to be an array"),
            (br#"[]"#, "'{'"),
            (
                br#"{"choices":[],"usage":{"completion_tokens":-1}}"#,
                "-1, not a count",
            ),
            (
                br#"{"choices":[],"usage":{"completion_tokens":2.0}}"#,
                "2.0, not a count",
            ),
            (
                br#"{"choices":[],"usage":{"prompt_tokens":"3"}}"#,
                "a digit",
            ),
            (br#"{"choices":[]"#, "',' or '}'"),
            (b"{\"choices\":[\"\xff\"]}", "not UTF-8 at byte 13"),
        ];
        for (body, says) in cases {
            let e = completion_usage(body).unwrap_err().to_string();
            assert!(e.contains(says), "{:?}: {e}", String::from_utf8_lossy(body));
        }
        let big = br#"{"choices":[],"usage":{"completion_tokens":18446744073709551616}}"#;
        assert!(matches!(
            completion_usage(big),
            Err(JsonError::NotACount {
                field: "usage.completion_tokens",
                ..
            })
        ));
    }

    #[test]
    fn nesting_is_bounded() {
        for depth in [1, 64, 128, 129, 100_000] {
            for doc in [
                format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
                format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)),
            ] {
                let judged = validate(doc.as_bytes());
                if depth <= MAX_DEPTH {
                    assert_eq!(judged, Ok(()), "{depth} deep");
                    assert!(serde_accepts(doc.as_bytes()));
                } else {
                    assert!(
                        judged
                            .unwrap_err()
                            .to_string()
                            .contains("nested more than 128 deep")
                    );
                }
            }
        }
    }

    #[test]
    fn edge_cases_agree_with_serde_json() {
        let docs: [&[u8]; 30] = [
            b"",
            b" ",
            b"0",
            b"-0",
            b"01",
            b"-",
            b"1.",
            b".5",
            b"1e",
            b"1e+",
            b"1E-7",
            b"-0.0e0",
            b"tru",
            b"true",
            b"nul",
            b"null x",
            b"\"\\u12\"",
            b"\"\\u12ag\"",
            b"\"\\ud800\"",
            b"\"\\x\"",
            b"\"a\tb\"",
            b"\"a\\tb\"",
            b"[1,]",
            b"[,1]",
            b"{\"a\":1,}",
            b"{1:2}",
            b"{\"a\" 1}",
            b" [ 1 , { \"b\" : [ ] } ] ",
            b"\"\xc3\xa9\"",
            b"[1]]",
        ];
        for d in docs {
            assert_eq!(
                validate(d).is_ok(),
                serde_accepts(d),
                "{:?}",
                String::from_utf8_lossy(d)
            );
        }
    }

    /// Generated JSON documents, written compactly or pretty.
    fn document() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".{0,8}".prop_map(serde_json::Value::from),
        ];
        let value = leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
                prop::collection::vec((".{0,6}", inner), 0..5)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        });
        (value, any::<bool>()).prop_map(|(v, pretty)| {
            if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                v.to_string()
            }
        })
    }

    proptest! {
        #[test]
        fn plain_bytes_are_counted_as_one_at_a_time(
            b in prop::collection::vec(
                prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x20, 0x20u8..=0xff, 0x80u8..=0xff],
                0..40,
            ),
            tail in prop::collection::vec(b'a'..=b'z', 0..20),
        ) {
            let mut b = tail.iter().copied().chain(b).collect::<Vec<u8>>();
            b.rotate_left(tail.len() / 2);
            let naive = b
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .unwrap_or(b.len());
            prop_assert_eq!(plain(&b), naive);
        }

        #[test]
        fn documents_are_accepted(doc in document()) {
            prop_assert_eq!(validate(doc.as_bytes()), Ok(()));
        }

        #[test]
        fn damaged_documents_are_judged_as_serde_json_judges_them(
            doc in document(),
            at in any::<prop::sample::Index>(),
            with in prop::sample::select(b"{}[]\",:\\ -+.eE0189tfnul\x01a\xff".to_vec()),
            cut in any::<bool>(),
        ) {
            let mut d = doc.into_bytes();
            if !d.is_empty() {
                let i = at.index(d.len());
                if cut { d.truncate(i) } else { d[i] = with }
            }
            prop_assert_eq!(
                validate(&d).is_ok(),
                serde_accepts(&d),
                "{:?}", String::from_utf8_lossy(&d)
            );
        }

        #[test]
        fn usage_is_read_as_serde_json_reads_it(
            prompt in prop::option::of(0u64..1_000_000),
            completion in prop::option::of(any::<u64>()),
            noise in document(),
        ) {
            let field = |n: Option<u64>| n.map_or("null".to_owned(), |n| n.to_string());
            let body = format!(
                r#"{{"noise":{noise},"choices":[{noise}],"usage":{{"total_tokens":{noise},"prompt_tokens":{},"completion_tokens":{}}}}}"#,
                field(prompt),
                field(completion)
            );
            prop_assert_eq!(
                completion_usage(body.as_bytes()),
                Ok(Some(Usage { prompt_tokens: prompt, completion_tokens: completion }))
            );
        }
    }
}
