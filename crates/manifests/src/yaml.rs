//! A small YAML writer that keeps comments (serde's YAML output cannot carry them, and the
//! generated files explain their choices in comments). Block style, two-space indent; strings
//! are quoted whenever a plain scalar could be read as something else.

/// Why a YAML text could not be read.
pub use serde_saphyr::Error;

/// Reads YAML the way inferscale reads every YAML file (plans, generated manifests, a
/// user's objects): YAML 1.2 booleans only (`yes` and `on` stay strings, as the core schema
/// says), and alias replay bounded so that a small file cannot expand into gigabytes.
///
/// ```
/// let v: serde_json::Value = inferscale_manifests::yaml::from_str("a: yes\nb: true\n").unwrap();
/// assert_eq!(v["a"], "yes");
/// assert_eq!(v["b"], true);
/// ```
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Error> {
    let mut o = serde_saphyr::Options::default();
    o.strict_booleans = true;
    o.alias_limits.max_total_replayed_events = 100_000;
    o.alias_limits.max_alias_expansions_per_anchor = 1_000;
    serde_saphyr::from_str_with_options(text, o)
}

/// A YAML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Y {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float (written shortest).
    Float(f64),
    /// A string (quoted when needed).
    Str(String),
    /// A string written as a literal block (`|-`), for multi-line PromQL and scripts.
    Block(String),
    /// A mapping, in order, with optional comments above keys.
    Map(Vec<Entry>),
    /// A sequence.
    Seq(Vec<Y>),
}

/// One key of a mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Y,
    /// A comment written above the key (may span lines).
    pub comment: Option<String>,
}

/// A mapping from `(key, value)` pairs.
pub fn map<K: Into<String>>(entries: Vec<(K, Y)>) -> Y {
    Y::Map(
        entries
            .into_iter()
            .map(|(k, v)| Entry {
                key: k.into(),
                value: v,
                comment: None,
            })
            .collect(),
    )
}

/// A string value.
pub fn s(v: impl Into<String>) -> Y {
    Y::Str(v.into())
}

/// An integer value.
#[cfg(test)]
pub fn i(v: i64) -> Y {
    Y::Int(v)
}

impl Y {
    /// The YAML form of a JSON value (what a typed object serialises to). Nulls in mappings
    /// are left out (an absent optional field); a null elsewhere becomes `~`'s string form.
    pub fn from_json(v: &serde_json::Value) -> Y {
        use serde_json::Value as J;
        match v {
            J::Null => Y::Str(String::new()),
            J::Bool(b) => Y::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Y::Int(i),
                None => Y::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::String(s) if s.contains('\n') => Y::Block(s.clone()),
            J::String(s) => Y::Str(s.clone()),
            J::Array(a) => Y::Seq(a.iter().map(Y::from_json).collect()),
            J::Object(m) => Y::Map(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| Entry {
                        key: k.clone(),
                        value: Y::from_json(v),
                        comment: None,
                    })
                    .collect(),
            ),
        }
    }

    /// Adds a comment above `key` (which must exist).
    #[cfg(test)]
    pub fn comment(mut self, key: &str, text: impl Into<String>) -> Y {
        if let Y::Map(entries) = &mut self
            && let Some(e) = entries.iter_mut().find(|e| e.key == key)
        {
            e.comment = Some(text.into());
        }
        self
    }
}

fn is_plain(v: &str) -> bool {
    if v.is_empty() || v.trim() != v {
        return false;
    }
    const WORDS: [&str; 14] = [
        "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", "True", "False", "Null",
        "NULL",
    ];
    if WORDS.contains(&v) || v.parse::<f64>().is_ok() || v.starts_with(['.', '-', '+']) {
        return false;
    }
    // YAML 1.1 reads 2026-12-02T18:00:00Z as a timestamp and 1:20 as the number 80.
    if v.starts_with(|c: char| c.is_ascii_digit()) && v.contains(['-', ':']) {
        return false;
    }
    let first_ok = v
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '/' || c == '_');
    first_ok
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:".contains(c))
        && !v.contains(": ")
        && !v.ends_with(':')
}

/// A string as a YAML scalar (plain or double-quoted).
pub fn scalar(v: &str) -> String {
    if is_plain(v) {
        v.to_owned()
    } else {
        // JSON's string escapes are valid in YAML's double-quoted style.
        serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into())
    }
}

fn float(f: f64) -> String {
    if f.is_finite() && f == f.trunc() && f.abs() < 1e15 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

/// Comment lines are wrapped to this width (indentation included).
const WIDTH: usize = 96;

fn wrap(line: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in line.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push(cur);
    out
}

fn write_comment(out: &mut String, pad: &str, text: &str) {
    let width = WIDTH.saturating_sub(pad.len() + 2).max(40);
    // Single line breaks in the text are soft (the words are re-wrapped); a blank line starts
    // a new paragraph.
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.split('\n').collect::<Vec<_>>().join(" "))
        .collect();
    let mut lines = Vec::new();
    for (i, p) in paragraphs.iter().enumerate() {
        if i > 0 {
            lines.push(String::new());
        }
        lines.extend(wrap(p, width));
    }
    for line in &lines {
        let line = line.as_str();
        if line.is_empty() {
            out.push_str(pad);
            out.push_str("#\n");
        } else {
            out.push_str(pad);
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
    }
}

fn inline(y: &Y) -> Option<String> {
    match y {
        Y::Bool(b) => Some(b.to_string()),
        Y::Int(n) => Some(n.to_string()),
        Y::Float(f) => Some(float(*f)),
        Y::Str(v) => Some(scalar(v)),
        Y::Map(m) if m.is_empty() => Some("{}".into()),
        Y::Seq(s) if s.is_empty() => Some("[]".into()),
        _ => None,
    }
}

fn block(out: &mut String, pad: &str, text: &str) {
    // The chomping indicator keeps the text's ending: `|-` none, `|` one line break, `|+` all
    // of them (a user's userData or script ends with one).
    let chomp = if text.ends_with("\n\n") {
        "+"
    } else if text.ends_with('\n') {
        ""
    } else {
        "-"
    };
    out.push('|');
    out.push_str(chomp);
    out.push('\n');
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(pad);
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
}

fn write_map(out: &mut String, entries: &[Entry], indent: usize, first_inline: bool) {
    let pad = " ".repeat(indent);
    for (k, e) in entries.iter().enumerate() {
        if let Some(c) = &e.comment {
            write_comment(out, &pad, c);
        }
        if !(k == 0 && first_inline) {
            out.push_str(&pad);
        }
        out.push_str(&scalar(&e.key));
        out.push(':');
        write_value(out, &e.value, indent);
    }
}

/// Writes the value after `key:` (inline, or on the next lines indented under `indent`).
fn write_value(out: &mut String, v: &Y, indent: usize) {
    if let Some(s) = inline(v) {
        out.push(' ');
        out.push_str(&s);
        out.push('\n');
        return;
    }
    match v {
        Y::Block(text) => {
            out.push(' ');
            block(out, &" ".repeat(indent), text);
        }
        Y::Map(m) => {
            out.push('\n');
            write_map(out, m, indent + 2, false);
        }
        Y::Seq(items) => {
            out.push('\n');
            write_seq(out, items, indent);
        }
        _ => {}
    }
}

fn write_seq(out: &mut String, items: &[Y], indent: usize) {
    let pad = " ".repeat(indent);
    for item in items {
        out.push_str(&pad);
        out.push('-');
        if let Some(s) = inline(item) {
            out.push(' ');
            out.push_str(&s);
            out.push('\n');
            continue;
        }
        match item {
            Y::Map(m) if m.first().is_some_and(|e| e.comment.is_some()) => {
                // A comment cannot follow "- " on the same line as a key: start below.
                out.push('\n');
                write_map(out, m, indent + 2, false);
            }
            Y::Map(m) => {
                out.push(' ');
                write_map(out, m, indent + 2, true);
            }
            Y::Seq(inner) => {
                out.push('\n');
                write_seq(out, inner, indent + 2);
            }
            Y::Block(text) => {
                out.push(' ');
                block(out, &pad, text);
            }
            _ => {}
        }
    }
}

/// One step of a field path: a mapping's key or a sequence's index.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `spec.triggers[0].metadata.threshold` as steps; `None` when it is not a path. A path into
/// a document that is a sequence (a JSON patch) starts with the index: `[0].op`.
fn steps(path: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    for (n, part) in path.split('.').enumerate() {
        let (key, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !key.is_empty() {
            out.push(Step::Key(key));
        } else if n > 0 || rest.is_empty() {
            return None;
        }
        while let Some(r) = rest.strip_prefix('[') {
            let (n, after) = r.split_once(']')?;
            out.push(Step::Index(n.parse().ok()?));
            rest = after;
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

impl Y {
    /// The entry a field path ends on (`spec.triggers[0].type`), when the value has it.
    fn entry_at(&mut self, path: &str) -> Option<&mut Entry> {
        let steps = steps(path)?;
        let (Step::Key(last), parents) = steps.split_last()? else {
            return None;
        };
        let mut at = self;
        for step in parents {
            at = match (step, at) {
                (Step::Key(k), Y::Map(m)) => &mut m.iter_mut().find(|e| e.key == *k)?.value,
                (Step::Index(n), Y::Seq(items)) => items.get_mut(*n)?,
                _ => return None,
            };
        }
        match at {
            Y::Map(m) => m.iter_mut().find(|e| e.key == *last),
            _ => None,
        }
    }
}

/// A typed object with what its file says about it: a comment above fields, named by their
/// path (`spec.triggers[0].metadata.threshold`), and the strings written as literal blocks
/// (PromQL reads better unquoted). The object is what the rehearsal, validation and the
/// writer take; [`Explained::to_yaml`] writes it once.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained<T> {
    /// The object.
    pub object: T,
    header: String,
    comments: Vec<(String, String)>,
    blocks: Vec<String>,
}

/// Why an [`Explained`] object could not be written: a generator bug, never a user's.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// A comment or a block style names a field the object does not have.
    #[error("the generator explains `{0}`, a field the object does not have")]
    Unplaced(String),
    /// The object has no JSON form (a map with keys that are not strings).
    #[error("the object cannot be serialised")]
    Serialise(#[source] serde_json::Error),
}

impl<T> Explained<T> {
    /// `object`, written under `header`.
    pub fn new(header: impl Into<String>, object: T) -> Explained<T> {
        Explained {
            object,
            header: header.into(),
            comments: Vec::new(),
            blocks: Vec::new(),
        }
    }

    /// A comment above the field at `path`.
    pub fn comment(&mut self, path: impl Into<String>, text: impl Into<String>) -> &mut Self {
        self.comments.push((path.into(), text.into()));
        self
    }

    /// The string at `path` is written as a literal block.
    pub fn block(&mut self, path: impl Into<String>) -> &mut Self {
        self.blocks.push(path.into());
        self
    }

    /// Takes a part built on its own (a trigger, a behaviour), placing its comments and
    /// blocks under `at` (the path the caller puts the part's object at), and returns the
    /// part's object.
    pub fn adopt<U>(&mut self, at: &str, part: Explained<U>) -> U {
        for (path, text) in part.comments {
            self.comments.push((format!("{at}.{path}"), text));
        }
        for path in part.blocks {
            self.blocks.push(format!("{at}.{path}"));
        }
        part.object
    }
}

impl<T: serde::Serialize> Explained<T> {
    /// The YAML document: the header, then the object in its type's field order (unknown
    /// fields after), with the comments placed.
    pub fn to_yaml(&self) -> Result<String, ExplainError> {
        let json = serde_json::to_value(&self.object).map_err(ExplainError::Serialise)?;
        let mut y = Y::from_json(&json);
        for path in &self.blocks {
            let e = y
                .entry_at(path)
                .ok_or_else(|| ExplainError::Unplaced(path.clone()))?;
            match &e.value {
                Y::Str(v) | Y::Block(v) => e.value = Y::Block(v.clone()),
                _ => return Err(ExplainError::Unplaced(path.clone())),
            }
        }
        for (path, text) in &self.comments {
            let e = y
                .entry_at(path)
                .ok_or_else(|| ExplainError::Unplaced(path.clone()))?;
            e.comment = Some(text.clone());
        }
        Ok(document(&self.header, &y))
    }
}

/// A document: an optional header comment, then the value.
pub fn document(header: &str, y: &Y) -> String {
    let mut out = String::new();
    write_comment(&mut out, "", header);
    match y {
        Y::Map(m) => write_map(&mut out, m, 0, false),
        Y::Seq(items) => write_seq(&mut out, items, 0),
        other => {
            if let Some(s) = inline(other) {
                out.push_str(&s);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> serde_json::Value {
        from_str(text).unwrap()
    }

    #[test]
    fn what_is_written_reads_back() {
        let y = map(vec![
            ("name", s("vllm")),
            ("threshold", s("25")),
            ("on", s("true")),
            ("n", i(3)),
            ("f", Y::Float(0.85)),
            ("whole", Y::Float(5.0)),
            ("q", Y::Block("sum(\n  vllm:num_requests_waiting\n)".into())),
            ("script", Y::Block("a\nb\n".into())),
            ("kept", Y::Block("a\n\n".into())),
            (
                "items",
                Y::Seq(vec![
                    map(vec![("type", s("Pods")), ("value", i(2))])
                        .comment("type", "first\nsecond"),
                    s("a: b"),
                    Y::Seq(vec![i(1), i(2)]),
                ]),
            ),
            ("empty", Y::Map(vec![])),
            (
                "nested",
                map(vec![("deep", map(vec![("x", Y::Bool(true))]))]),
            ),
        ])
        .comment("q", "the query");
        let text = document("header", &y);
        let v = parse(&text);
        assert_eq!(v["threshold"], "25", "{text}");
        assert_eq!(v["on"], "true");
        assert_eq!(v["n"], 3);
        assert_eq!(v["f"], 0.85);
        assert_eq!(v["whole"], 5.0);
        assert_eq!(v["q"], "sum(\n  vllm:num_requests_waiting\n)");
        assert_eq!(v["script"], "a\nb\n", "{text}");
        assert_eq!(v["kept"], "a\n\n", "{text}");
        assert_eq!(v["items"][0]["value"], 2);
        assert_eq!(v["items"][1], "a: b");
        assert_eq!(v["items"][2][1], 2);
        assert_eq!(v["nested"]["deep"]["x"], true);
        assert!(text.contains("# the query\n"));
        assert!(text.starts_with("# header\n"));
    }

    #[test]
    fn an_explained_object_places_its_comments_by_path() {
        #[derive(Clone, serde::Serialize)]
        struct Part {
            kind: &'static str,
            query: &'static str,
        }
        #[derive(Clone, serde::Serialize)]
        struct Whole {
            name: &'static str,
            parts: Vec<Part>,
        }
        let mut part = Explained::new(
            "",
            Part {
                kind: "prometheus",
                query: "sum(x{a=\"b\"})",
            },
        );
        part.comment("kind", "the part").block("query");
        let mut whole = Explained::new(
            "head",
            Whole {
                name: "w",
                parts: Vec::new(),
            },
        );
        whole.comment("name", "the name");
        let p = whole.adopt("parts[0]", part);
        whole.object.parts.push(p);
        let text = whole.to_yaml().unwrap();
        assert_eq!(
            text,
            "# head\n# the name\nname: w\nparts:\n-\n  # the part\n  kind: prometheus\n  query: |-\n    sum(x{a=\"b\"})\n"
        );
        // A document that is a sequence: its paths start with the index.
        let mut list = Explained::new("patch", vec![whole.object.parts[0].clone()]);
        list.comment("[0].kind", "first");
        assert_eq!(
            list.to_yaml().unwrap(),
            "# patch\n-\n  # first\n  kind: prometheus\n  query: \"sum(x{a=\\\"b\\\"})\"\n"
        );
        assert_eq!(parse(&text)["parts"][0]["query"], "sum(x{a=\"b\"})");
        for wrong in [
            "parts[1].kind",
            "parts.kind",
            "nothing",
            "name[0]",
            "parts[0].",
            "",
            "[0]",
            "[0].name",
            "name.[0]",
        ] {
            let mut w = whole.clone();
            w.comment(wrong, "x");
            assert!(
                matches!(w.to_yaml(), Err(ExplainError::Unplaced(p)) if p == wrong),
                "{wrong}"
            );
        }
    }

    #[test]
    fn risky_strings_are_quoted() {
        for v in [
            "yes",
            "1.5",
            "-x",
            "a # b",
            "",
            " lead",
            "x: y",
            "http://a:9090",
            "5m",
            "{a}",
        ] {
            let text = document("", &map(vec![("k", s(v))]));
            assert_eq!(parse(&text)["k"], v, "{text}");
        }
    }
}
