//! The text parser for both formats, lenient by default and strict on request.
//!
//! The parser walks the input once, line by line, and appends to the flat vectors of an
//! [`Exposition`]. Names and label values are sliced out of the input; only values with escape
//! sequences are copied. The lenient mode accepts what Prometheus' own scraper accepts (blanks
//! between tokens, trailing commas, comments, missing `# EOF`); the strict mode enforces the
//! OpenMetrics 1.0 grammar and its semantic rules, and is what `--strict` validation uses.

use std::borrow::Cow;

use crate::error::ParseError;
use crate::model::{Exemplar, Exposition, FamilyData, Format, Label, MetricType, SampleData};
use crate::strict::StrictState;

/// How to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParseOptions {
    /// The format; `None` detects it from the text ([`Format::detect`]).
    pub format: Option<Format>,
    /// Enforce the OpenMetrics 1.0 rules (implies [`Format::OpenMetrics`]).
    pub strict: bool,
}

/// Parses a Prometheus text or OpenMetrics body, detecting the format from the text.
///
/// ```
/// let text = b"# TYPE queue gauge\nqueue{model=\"m\"} 3\n";
/// let exp = inferscale_promtext::parse(text).unwrap();
/// let fam = exp.family("queue").unwrap();
/// assert_eq!(fam.samples().next().unwrap().value(), 3.0);
/// ```
pub fn parse(text: &[u8]) -> Result<Exposition<'_>, ParseError> {
    parse_with(text, ParseOptions::default())
}

/// Parses with explicit options.
pub fn parse_with(text: &[u8], options: ParseOptions) -> Result<Exposition<'_>, ParseError> {
    let text = match std::str::from_utf8(text) {
        Ok(t) => t,
        Err(e) => return Err(utf8_error(text, e.valid_up_to())),
    };
    let format = if options.strict {
        Format::OpenMetrics
    } else {
        options
            .format
            .unwrap_or_else(|| Format::detect(text.as_bytes()))
    };
    Parser::new(text, format, options.strict).run()
}

/// Validates a body as OpenMetrics 1.0 and returns what it holds.
///
/// ```
/// use inferscale_promtext::validate_openmetrics;
/// assert!(validate_openmetrics(b"# TYPE a counter\na_total 1\n# EOF\n").is_ok());
/// let err = validate_openmetrics(b"# TYPE a counter\na_total -1\n# EOF\n").unwrap_err();
/// assert_eq!(err.line, 2);
/// ```
pub fn validate_openmetrics(text: &[u8]) -> Result<Exposition<'_>, ParseError> {
    parse_with(
        text,
        ParseOptions {
            format: Some(Format::OpenMetrics),
            strict: true,
        },
    )
}

fn utf8_error(text: &[u8], valid_up_to: usize) -> ParseError {
    let before = &text[..valid_up_to];
    let line = memchr::memchr_iter(b'\n', before).count() as u32 + 1;
    let line_start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count() as u32
        + 1;
    ParseError {
        line,
        column,
        message: "invalid UTF-8".to_owned(),
    }
}

/// Metric names: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// Label names: `[a-zA-Z_][a-zA-Z0-9_]*`.
fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `name` is a metric name that can be written without quotes.
pub(crate) fn is_legacy_metric_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && is_name_start(b[0]) && b[1..].iter().all(|&c| is_name_char(c))
}

/// Whether `name` is a label name that can be written without quotes.
pub(crate) fn is_legacy_label_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && is_label_start(b[0]) && b[1..].iter().all(|&c| is_label_char(c))
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Parses a sample value: decimal floats, `NaN`, `±Inf` (any case), leading zeros.
///
/// Integers of up to 15 digits, which is most of what servers write, skip the general float
/// parser.
pub(crate) fn parse_value(tok: &str) -> Option<f64> {
    let b = tok.as_bytes();
    if !b.is_empty() && b.len() <= 15 && b.iter().all(u8::is_ascii_digit) {
        let mut v: u64 = 0;
        for &d in b {
            v = v * 10 + u64::from(d - b'0');
        }
        return Some(v as f64);
    }
    // `str::parse::<f64>` accepts exactly the decimal, `inf`, `infinity` and `nan` spellings
    // (case-insensitive, optionally signed) that Go's ParseFloat and Python's float() share,
    // and rejects hex floats and digit separators, which OpenMetrics forbids.
    tok.parse::<f64>().ok()
}

/// The state of one line being parsed.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    fn skip_blanks(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(is_blank) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// The separator between a line's fields: one space in strict mode, any run of blanks
    /// otherwise. Returns how many bytes it took (0: none there).
    fn separator(&mut self, strict: bool) -> usize {
        if strict {
            usize::from(self.eat(b' '))
        } else {
            self.skip_blanks()
        }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.pos;
        let b = self.bytes();
        while self.pos < b.len() && f(b[self.pos]) {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// A token up to the next separator (a space in strict mode, a blank otherwise).
    fn token(&mut self, strict: bool) -> &'a str {
        if strict {
            self.take_while(|b| b != b' ')
        } else {
            self.take_while(|b| !is_blank(b))
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos.min(self.text.len())..]
    }
}

/// Why a quoted string could not be read.
enum QuoteError {
    Unterminated,
}

/// Reads a double-quoted string starting at the opening quote and decodes `\\`, `\"` and `\n`.
/// Any other backslash sequence is kept as written, as Prometheus' and Python's parsers do.
fn read_quoted<'a>(cur: &mut Cursor<'a>) -> Result<Cow<'a, str>, QuoteError> {
    debug_assert_eq!(cur.peek(), Some(b'"'));
    cur.pos += 1;
    let start = cur.pos;
    let b = cur.bytes();
    // Fast path: no escapes before the closing quote.
    match memchr::memchr2(b'"', b'\\', &b[start..]) {
        None => return Err(QuoteError::Unterminated),
        Some(i) if b[start + i] == b'"' => {
            cur.pos = start + i + 1;
            return Ok(Cow::Borrowed(&cur.text[start..start + i]));
        }
        Some(_) => {}
    }
    let mut out = String::new();
    let mut seg = start;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'"' => {
                out.push_str(&cur.text[seg..i]);
                cur.pos = i + 1;
                return Ok(Cow::Owned(out));
            }
            b'\\' => {
                out.push_str(&cur.text[seg..i]);
                match b.get(i + 1) {
                    Some(b'\\') => out.push('\\'),
                    Some(b'"') => out.push('"'),
                    Some(b'n') => out.push('\n'),
                    Some(_) => {
                        // Keep the backslash; the next character is copied with the next segment.
                        out.push('\\');
                        seg = i + 1;
                        i += 1;
                        continue;
                    }
                    None => return Err(QuoteError::Unterminated),
                }
                i += 2;
                seg = i;
            }
            _ => i += 1,
        }
    }
    Err(QuoteError::Unterminated)
}

/// Decodes a HELP text. Prometheus text knows `\\` and `\n`; OpenMetrics also `\"`.
fn unescape_help(text: &str, format: Format) -> Cow<'_, str> {
    if !text.as_bytes().contains(&b'\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if format == Format::OpenMetrics => out.push('"'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

/// What the parser knows about the family it is filling.
struct Current {
    /// Index into `Exposition::families`.
    index: usize,
    /// 1-based line where the family started.
    line: u32,
}

pub(crate) struct Parser<'a> {
    text: &'a str,
    format: Format,
    strict: bool,
    out: Exposition<'a>,
    current: Option<Current>,
    line_no: u32,
    eof: bool,
    strict_state: Option<Box<StrictState>>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, format: Format, strict: bool) -> Self {
        let mut out = Exposition::new(format);
        // A rough guess that saves most regrowth on typical expositions (~60 bytes a sample).
        let guess = text.len() / 64;
        out.samples.reserve(guess);
        out.labels.reserve(guess * 2);
        Parser {
            text,
            format,
            strict,
            out,
            current: None,
            line_no: 0,
            eof: false,
            strict_state: strict.then(|| Box::new(StrictState::default())),
        }
    }

    fn run(mut self) -> Result<Exposition<'a>, ParseError> {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            let end = memchr::memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |i| pos + i);
            self.line_no += 1;
            let mut line = &text[pos..end];
            if !self.strict {
                // Windows line endings (and stray carriage returns before the newline) are not
                // part of the line.
                line = line.trim_end_matches('\r');
            }
            self.line(line)?;
            pos = end + 1;
        }
        self.finish_family()?;
        if self.strict && !self.eof {
            return Err(ParseError {
                line: self.line_no.max(1),
                column: 1,
                message: "missing \"# EOF\" at the end of the exposition".to_owned(),
            });
        }
        Ok(self.out)
    }

    fn err_at(&self, line: &str, byte_pos: usize, message: impl Into<String>) -> ParseError {
        let byte_pos = byte_pos.min(line.len());
        let column = line
            .char_indices()
            .take_while(|(i, _)| *i < byte_pos)
            .count() as u32
            + 1;
        ParseError {
            line: self.line_no,
            column,
            message: message.into(),
        }
    }

    fn line(&mut self, line: &'a str) -> Result<(), ParseError> {
        if self.eof {
            if !self.strict && line.trim().is_empty() {
                return Ok(());
            }
            return Err(self.err_at(line, 0, "text after \"# EOF\""));
        }
        if line.is_empty() {
            if self.strict {
                return Err(self.err_at(line, 0, "blank lines are not allowed in OpenMetrics"));
            }
            return Ok(());
        }
        let first = line.as_bytes()[0];
        if first == b'#' {
            return self.comment_line(line);
        }
        if !self.strict {
            let trimmed = line.trim_start_matches([' ', '\t']);
            if trimmed.is_empty() {
                return Ok(());
            }
            if trimmed.starts_with('#') {
                return self.comment_line(line);
            }
        }
        self.sample_line(line)
    }

    fn comment_line(&mut self, line: &'a str) -> Result<(), ParseError> {
        if line == "# EOF" {
            self.eof = true;
            return Ok(());
        }
        let mut cur = Cursor { text: line, pos: 0 };
        cur.skip_blanks();
        cur.pos += 1; // '#'
        let blanks = cur.skip_blanks();
        let keyword_at = cur.pos;
        let keyword = cur.take_while(|b| b.is_ascii_alphabetic());
        let kind = match keyword {
            "HELP" => Meta::Help,
            "TYPE" => Meta::Type,
            "UNIT" => Meta::Unit,
            _ => {
                if self.strict {
                    return Err(self.err_at(
                        line,
                        keyword_at,
                        "expected HELP, TYPE, UNIT or EOF after '#'",
                    ));
                }
                return Ok(()); // A comment.
            }
        };
        if self.strict {
            if blanks != 1 || line.as_bytes().get(1) != Some(&b' ') {
                return Err(self.err_at(line, 1, "expected exactly one space after '#'"));
            }
            if !cur.eat(b' ') {
                return Err(self.err_at(
                    line,
                    cur.pos,
                    format!("expected a space and a metric name after {keyword}"),
                ));
            }
        } else {
            if blanks == 0 {
                return Ok(()); // "#HELP" is a comment in the Prometheus format.
            }
            if cur.skip_blanks() == 0 {
                return Ok(());
            }
            if cur.at_end() {
                return Ok(()); // "# HELP" alone is a comment too.
            }
        }
        let name_at = cur.pos;
        let name: Cow<'a, str> = if cur.peek() == Some(b'"') {
            read_quoted(&mut cur)
                .map_err(|_| self.err_at(line, name_at, "unterminated quoted metric name"))?
        } else {
            let n = cur.take_while(is_name_char);
            if n.is_empty() || !is_name_start(n.as_bytes()[0]) {
                return Err(self.err_at(
                    line,
                    name_at,
                    format!("invalid metric name in {keyword} line"),
                ));
            }
            Cow::Borrowed(n)
        };
        let rest: &'a str = if self.strict {
            if !cur.eat(b' ') {
                let what = match kind {
                    Meta::Help => "HELP text",
                    Meta::Type => "metric type",
                    Meta::Unit => "unit",
                };
                return Err(self.err_at(
                    line,
                    cur.pos,
                    format!("expected a space and the {what} after the metric name"),
                ));
            }
            cur.rest()
        } else {
            if !cur.at_end() && cur.skip_blanks() == 0 {
                return Err(self.err_at(line, cur.pos, "expected a blank after the metric name"));
            }
            match kind {
                Meta::Help => cur.rest(),
                Meta::Type | Meta::Unit => cur.rest().trim_end_matches([' ', '\t', '\r']),
            }
        };
        self.metadata(line, kind, name, rest, name_at, cur.pos)
    }

    fn metadata(
        &mut self,
        line: &'a str,
        kind: Meta,
        name: Cow<'a, str>,
        rest: &'a str,
        name_at: usize,
        rest_at: usize,
    ) -> Result<(), ParseError> {
        let same = self
            .current
            .as_ref()
            .is_some_and(|c| self.out.families[c.index].name == name);
        if same {
            let has_samples = self
                .current
                .as_ref()
                .is_some_and(|c| !self.out.families[c.index].samples.is_empty());
            if has_samples && (self.strict || kind == Meta::Type) {
                return Err(self.err_at(
                    line,
                    0,
                    format!("{} for {name} after its samples", kind.word()),
                ));
            }
        } else {
            self.open_family(name)?;
        }
        let Some(index) = self.current.as_ref().map(|c| c.index) else {
            return Ok(());
        };
        let format = self.format;
        let strict = self.strict;
        let fam = &mut self.out.families[index];
        match kind {
            Meta::Help => {
                if fam.help.is_some() && (strict || fam.samples.is_empty()) {
                    let msg = format!("second HELP line for {}", fam.name);
                    return Err(self.err_at(line, 0, msg));
                }
                if fam.help.is_none() {
                    fam.help = Some(unescape_help(rest, format));
                }
            }
            Meta::Type => {
                if fam.typed {
                    let msg = format!("second TYPE line for {}", fam.name);
                    return Err(self.err_at(line, 0, msg));
                }
                let Some(t) = MetricType::from_keyword(rest) else {
                    return Err(self.err_at(
                        line,
                        rest_at,
                        format!("unknown metric type {rest:?}"),
                    ));
                };
                if strict && rest == "untyped" {
                    return Err(self.err_at(
                        line,
                        rest_at,
                        "\"untyped\" is not an OpenMetrics type (use \"unknown\")",
                    ));
                }
                fam.kind = t;
                fam.typed = true;
            }
            Meta::Unit => {
                if fam.unit.is_some() {
                    let msg = format!("second UNIT line for {}", fam.name);
                    return Err(self.err_at(line, 0, msg));
                }
                fam.unit = Some(Cow::Borrowed(rest));
            }
        }
        let _ = name_at;
        Ok(())
    }

    /// Closes the current family; in strict mode runs the family-level checks.
    /// Finishes the current family and starts `name`'s, untyped until its `# TYPE` says
    /// otherwise, at this line.
    fn open_family(&mut self, name: Cow<'a, str>) -> Result<(), ParseError> {
        self.finish_family()?;
        let at = self.out.samples.len() as u32;
        self.out.families.push(FamilyData {
            name,
            kind: MetricType::Unknown,
            typed: false,
            help: None,
            unit: None,
            samples: at..at,
        });
        self.current = Some(Current {
            index: self.out.families.len() - 1,
            line: self.line_no,
        });
        Ok(())
    }

    fn finish_family(&mut self) -> Result<(), ParseError> {
        let Some(cur) = self.current.take() else {
            return Ok(());
        };
        if let Some(state) = self.strict_state.as_mut() {
            let fam = &self.out.families[cur.index];
            state.finish_family(&self.out, fam, cur.line)?;
        }
        Ok(())
    }

    fn sample_line(&mut self, line: &'a str) -> Result<(), ParseError> {
        let strict = self.strict;
        let mut cur = Cursor { text: line, pos: 0 };
        if !strict {
            cur.skip_blanks();
        }
        let label_start = self.out.labels.len() as u32;
        let mut name: Option<Cow<'a, str>> = None;
        let name_at = cur.pos;
        match cur.peek() {
            Some(b'{') => {}
            Some(b) if is_name_start(b) => {
                name = Some(Cow::Borrowed(cur.take_while(is_name_char)));
            }
            _ => return Err(self.err_at(line, cur.pos, "expected a metric name")),
        }
        if !strict && name.is_some() {
            let save = cur.pos;
            cur.skip_blanks();
            if cur.peek() != Some(b'{') {
                cur.pos = save;
            }
        }
        if cur.peek() == Some(b'{') {
            self.labels(line, &mut cur, &mut name)?;
        }
        let Some(name) = name else {
            return Err(self.err_at(line, name_at, "no metric name before or inside the braces"));
        };
        if let Some(c) = cur.rest().chars().next()
            && !matches!(c, ' ' | '\t' | '{')
        {
            return Err(self.err_at(
                line,
                cur.pos,
                format!("invalid character {c:?} in metric name"),
            ));
        }
        // Value.
        let sep = cur.separator(strict);
        if sep == 0 {
            let msg = if cur.at_end() {
                "expected a value after the metric"
            } else {
                "expected a space before the value"
            };
            return Err(self.err_at(line, cur.pos, msg));
        }
        let value_at = cur.pos;
        let value_tok = cur.token(strict);
        let Some(value) = parse_value(value_tok) else {
            let msg = if value_tok.is_empty() {
                "expected a value".to_owned()
            } else {
                format!("invalid value {value_tok:?}")
            };
            return Err(self.err_at(line, value_at, msg));
        };
        // Timestamp and exemplar.
        let mut timestamp = None;
        let mut exemplar = None;
        if !cur.at_end() {
            let blanks = cur.separator(strict);
            if blanks == 0 && strict {
                return Err(self.err_at(line, cur.pos, "expected a space after the value"));
            }
            if !cur.at_end() && cur.peek() != Some(b'#') {
                let ts_at = cur.pos;
                let tok = cur.token(strict);
                timestamp = Some(self.timestamp(line, tok, ts_at)?);
                if !cur.at_end() {
                    let blanks = cur.separator(strict);
                    if blanks == 0 && strict {
                        return Err(self.err_at(
                            line,
                            cur.pos,
                            "expected a space after the timestamp",
                        ));
                    }
                }
            } else if cur.at_end() && strict {
                return Err(self.err_at(line, cur.pos, "trailing space after the value"));
            }
            if cur.peek() == Some(b'#') {
                exemplar = Some(Box::new(self.exemplar(line, &mut cur)?));
            } else if !cur.at_end() {
                return Err(self.err_at(line, cur.pos, "unexpected text after the timestamp"));
            } else if strict && line.ends_with(' ') {
                return Err(self.err_at(line, cur.pos, "trailing space"));
            }
        }
        let label_end = self.out.labels.len() as u32;
        self.attach(
            line,
            name,
            label_start..label_end,
            value,
            timestamp,
            exemplar,
        )
    }

    fn timestamp(&self, line: &str, tok: &str, at: usize) -> Result<f64, ParseError> {
        let bad = || self.err_at(line, at, format!("invalid timestamp {tok:?}"));
        match self.format {
            Format::PrometheusText => {
                // Milliseconds as an integer; accept a float too, as the Python parser does.
                if let Ok(ms) = tok.parse::<i64>() {
                    return Ok(ms as f64 / 1000.0);
                }
                match parse_value(tok) {
                    Some(v) if v.is_finite() => Ok(v / 1000.0),
                    _ => Err(bad()),
                }
            }
            Format::OpenMetrics => match parse_value(tok) {
                Some(v) if v.is_finite() => Ok(v),
                _ => Err(bad()),
            },
        }
    }

    /// Parses `{...}` at the cursor into `self.out.labels`. A quoted term without `=` is the
    /// metric name (the UTF-8 syntax `{"my.metric", a="b"}`).
    fn labels(
        &mut self,
        line: &'a str,
        cur: &mut Cursor<'a>,
        name: &mut Option<Cow<'a, str>>,
    ) -> Result<(), ParseError> {
        let strict = self.strict;
        let start = self.out.labels.len();
        cur.pos += 1; // '{'
        let mut first = true;
        // Duplicates are found by a scan while a series has few labels, and through a set
        // once it has many: a line with a million labels parses in linear time.
        let mut seen: Option<std::collections::HashSet<Cow<'a, str>>> = None;
        loop {
            if !strict {
                cur.skip_blanks();
            }
            if cur.eat(b'}') {
                return Ok(());
            }
            if !first {
                // After a label we need a comma (and, leniently, allow one before '}').
                if !cur.eat(b',') {
                    return Err(self.err_at(line, cur.pos, "expected ',' or '}' after a label"));
                }
                if !strict {
                    cur.skip_blanks();
                    if cur.eat(b'}') {
                        return Ok(());
                    }
                }
            }
            first = false;
            let at = cur.pos;
            let lname: Cow<'a, str> = match cur.peek() {
                Some(b'"') => {
                    let q = read_quoted(cur)
                        .map_err(|_| self.err_at(line, at, "unterminated quoted name"))?;
                    if !strict {
                        cur.skip_blanks();
                    }
                    if matches!(cur.peek(), Some(b',') | Some(b'}')) {
                        if name.is_some() {
                            return Err(self.err_at(line, at, "metric name given twice"));
                        }
                        *name = Some(q);
                        continue;
                    }
                    q
                }
                Some(b) if is_label_start(b) => Cow::Borrowed(cur.take_while(is_label_char)),
                Some(_) => return Err(self.err_at(line, at, "invalid label name")),
                None => return Err(self.err_at(line, at, "unterminated label set (missing '}')")),
            };
            if !strict {
                cur.skip_blanks();
            }
            if !cur.eat(b'=') {
                return Err(self.err_at(
                    line,
                    cur.pos,
                    format!("expected '=' after label name {lname}"),
                ));
            }
            if !strict {
                cur.skip_blanks();
            }
            let vat = cur.pos;
            if cur.peek() != Some(b'"') {
                return Err(self.err_at(
                    line,
                    vat,
                    format!("expected a quoted value for label {lname}"),
                ));
            }
            let value = read_quoted(cur).map_err(|_| {
                self.err_at(line, vat, format!("unterminated value for label {lname}"))
            })?;
            if lname == "__name__" {
                if name.is_some() {
                    return Err(self.err_at(line, at, "metric name given twice (__name__ label)"));
                }
                *name = Some(value);
                continue;
            }
            let so_far = &self.out.labels[start..];
            let duplicate = match &mut seen {
                Some(set) => !set.insert(lname.clone()),
                None if so_far.len() < 16 => so_far.iter().any(|l| l.name == lname),
                None => {
                    let mut set: std::collections::HashSet<Cow<'a, str>> =
                        so_far.iter().map(|l| l.name.clone()).collect();
                    let dup = !set.insert(lname.clone());
                    seen = Some(set);
                    dup
                }
            };
            if duplicate {
                return Err(self.err_at(line, at, format!("duplicate label {lname}")));
            }
            self.out.labels.push(Label { name: lname, value });
        }
    }

    fn exemplar(
        &mut self,
        line: &'a str,
        cur: &mut Cursor<'a>,
    ) -> Result<Exemplar<'a>, ParseError> {
        let strict = self.strict;
        let at = cur.pos;
        cur.pos += 1; // '#'
        let blanks = cur.separator(strict);
        if blanks == 0 || cur.peek() != Some(b'{') {
            return Err(self.err_at(
                line,
                at,
                "malformed exemplar: expected \"# {labels} value\"",
            ));
        }
        // Parse the exemplar's labels with the same code, then move them out.
        let start = self.out.labels.len();
        let mut no_name = None;
        self.labels(line, cur, &mut no_name)?;
        if no_name.is_some() {
            return Err(self.err_at(line, at, "exemplar labels cannot name a metric"));
        }
        let labels: Vec<Label<'a>> = self.out.labels.drain(start..).collect();
        if strict {
            let len: usize = labels
                .iter()
                .map(|l| l.name.chars().count() + l.value.chars().count())
                .sum();
            if len > 128 {
                return Err(self.err_at(
                    line,
                    at,
                    format!("exemplar labels are {len} characters long; at most 128 are allowed"),
                ));
            }
        }
        let blanks = cur.separator(strict);
        if blanks == 0 {
            return Err(self.err_at(
                line,
                cur.pos,
                "expected a space and a value after the exemplar labels",
            ));
        }
        let vat = cur.pos;
        let tok = cur.token(strict);
        let Some(value) = parse_value(tok) else {
            return Err(self.err_at(line, vat, format!("invalid exemplar value {tok:?}")));
        };
        let mut timestamp = None;
        if !cur.at_end() {
            let blanks = cur.separator(strict);
            if blanks == 0 || (strict && cur.at_end()) {
                return Err(self.err_at(line, cur.pos, "unexpected text after the exemplar value"));
            }
            if !cur.at_end() {
                let tat = cur.pos;
                let tok = cur.token(strict);
                match parse_value(tok) {
                    Some(v) if v.is_finite() => timestamp = Some(v),
                    _ => {
                        return Err(self.err_at(
                            line,
                            tat,
                            format!("invalid exemplar timestamp {tok:?}"),
                        ));
                    }
                }
                if !strict {
                    cur.skip_blanks();
                }
                if !cur.at_end() {
                    return Err(self.err_at(
                        line,
                        cur.pos,
                        "unexpected text after the exemplar timestamp",
                    ));
                }
            }
        }
        Ok(Exemplar {
            labels,
            value,
            timestamp,
        })
    }

    /// Files a parsed sample under the current family or starts a new one.
    fn attach(
        &mut self,
        line: &'a str,
        name: Cow<'a, str>,
        labels: std::ops::Range<u32>,
        value: f64,
        timestamp: Option<f64>,
        exemplar: Option<Box<Exemplar<'a>>>,
    ) -> Result<(), ParseError> {
        let fits = self.current.as_ref().is_some_and(|c| {
            let fam = &self.out.families[c.index];
            sample_fits(&fam.name, fam.kind, &name, self.strict)
        });
        if !fits {
            self.open_family(name.clone())?;
        }
        let data = SampleData {
            name,
            labels,
            value,
            timestamp,
            exemplar,
            line: self.line_no,
        };
        if let (Some(state), Some(c)) = (self.strict_state.as_mut(), self.current.as_ref()) {
            let fam = &self.out.families[c.index];
            let label_slice =
                &self.out.labels[data.labels.start as usize..data.labels.end as usize];
            if let Err(v) = state.check_sample(fam, &data, label_slice) {
                return Err(self.err_at(line, 0, v.to_string()));
            }
        }
        self.out.push_sample_data(data);
        Ok(())
    }
}

/// Whether a sample called `sample` belongs to the family `family` of type `kind`.
fn sample_fits(family: &str, kind: MetricType, sample: &str, strict: bool) -> bool {
    let Some(suffix) = sample.strip_prefix(family) else {
        return false;
    };
    if suffix.is_empty() {
        // A counter sample without `_total` is what Prometheus text writers emit for counters
        // whose family name already ends in `_total`.
        return match kind {
            MetricType::Counter => !strict,
            MetricType::Histogram | MetricType::GaugeHistogram | MetricType::Info => false,
            _ => true,
        };
    }
    kind.suffixes().contains(&suffix)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meta {
    Help,
    Type,
    Unit,
}

impl Meta {
    fn word(self) -> &'static str {
        match self {
            Meta::Help => "HELP",
            Meta::Type => "TYPE",
            Meta::Unit => "UNIT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_labels_are_found_however_many_a_series_has() {
        // Past 16 labels the check goes through a set; it must find the same duplicates.
        for n in [3usize, 16, 17, 200_000] {
            let labels: Vec<String> = (0..n).map(|i| format!("l{i}=\"v\"")).collect();
            let ok = format!("m{{{}}} 1\n", labels.join(","));
            let exp = parse(ok.as_bytes()).unwrap();
            assert_eq!(exp.samples().next().unwrap().labels().len(), n);
            let dup = format!("m{{{},l{}=\"w\"}} 1\n", labels.join(","), n / 2);
            let e = parse(dup.as_bytes()).unwrap_err();
            assert!(e.to_string().contains("duplicate label"), "{n}: {e}");
        }
    }

    #[test]
    fn values() {
        assert_eq!(parse_value("1"), Some(1.0));
        assert_eq!(parse_value("000001"), Some(1.0));
        assert_eq!(parse_value("1e-05"), Some(1e-5));
        assert_eq!(parse_value("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_value("-inf"), Some(f64::NEG_INFINITY));
        assert!(parse_value("NaN").is_some_and(f64::is_nan));
        assert_eq!(
            parse_value("9223372036854775808"),
            Some(9223372036854775808.0)
        );
        assert_eq!(parse_value("8.969000"), Some(8.969));
        for bad in ["", "1_2", "0x1", "0x1p-3", "a", "1 ", "++1", "1e"] {
            assert_eq!(parse_value(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn prometheus_text_basics() {
        let text = "# HELP a_total Some help \\n here\n# TYPE a_total counter\na_total{x=\"1\",y=\"a\\\"b\",} 3 1700000000000\n\
                    # a comment\n  b  {  z = \"q\" }   4.5\n";
        let exp = parse(text.as_bytes()).unwrap();
        assert_eq!(exp.family_count(), 2);
        let a = exp.family("a_total").unwrap();
        assert_eq!(a.kind(), MetricType::Counter);
        assert_eq!(a.help(), Some("Some help \n here"));
        let s = a.samples().next().unwrap();
        assert_eq!(s.label("y"), Some("a\"b"));
        assert_eq!(s.timestamp(), Some(1_700_000_000.0));
        let b = exp.family("b").unwrap();
        assert_eq!(b.kind(), MetricType::Unknown);
        assert_eq!(b.samples().next().unwrap().label("z"), Some("q"));
    }

    #[test]
    fn histogram_groups_with_created_in_openmetrics() {
        let text = "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 3\nh_created 1.5e9\n# EOF\n";
        let exp = parse(text.as_bytes()).unwrap();
        assert_eq!(exp.format(), Format::OpenMetrics);
        assert_eq!(exp.family_count(), 1);
        assert_eq!(exp.family("h").unwrap().len(), 5);
    }

    #[test]
    fn utf8_names() {
        let exp = parse(b"{\"my.metric\", a=\"b\"} 1\n").unwrap();
        let f = exp.family("my.metric").unwrap();
        assert_eq!(f.samples().next().unwrap().label("a"), Some("b"));
    }

    #[test]
    fn errors_carry_positions() {
        let err = parse(b"ok 1\nbad{a=1} 2\n").unwrap_err();
        assert_eq!((err.line, err.column), (2, 7));
        let err = parse(b"x 1\n\xffy 2\n").unwrap_err();
        assert_eq!((err.line, err.column), (2, 1));
        let err = parse("é{é=\"\"} 1\n".as_bytes()).unwrap_err();
        assert_eq!((err.line, err.column), (1, 1));
        let err = parse("a{b=\"é\",c} 1\n".as_bytes()).unwrap_err();
        assert_eq!((err.line, err.column), (1, 10));
    }

    /// Found by fuzzing: a HELP line ending in several carriage returns lost one per round
    /// trip, because only one was taken as the line ending.
    #[test]
    fn regression_trailing_carriage_returns_are_not_help_text() {
        let exp = parse(b"# HELP a text\r\r\r\n").unwrap();
        assert_eq!(exp.family("a").unwrap().help(), Some("text"));
    }

    /// Found by fuzzing: a UNIT followed by blanks and a carriage return kept the return.
    #[test]
    fn regression_unit_trailing_whitespace_and_carriage_return() {
        let exp = parse(b"# UNIT a_s s\t\t\r\t\t\n").unwrap();
        assert_eq!(exp.family("a_s").unwrap().unit(), Some("s"));
    }

    #[test]
    fn duplicate_type_is_an_error() {
        assert!(parse(b"# TYPE a gauge\n# TYPE a gauge\n").is_err());
        assert!(parse(b"# TYPE a gauge\na 1\n# TYPE a gauge\n").is_err());
    }
}
