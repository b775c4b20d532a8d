//! ARCHITECTURE.md's invariants that a test can check, read from the workspace's sources:
//! the pure crates' dependencies, the errors of library code, the clock seam and long functions.

use std::path::{Path, PathBuf};

/// The workspace's root (this crate is `crates/testkit`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// The crates ARCHITECTURE.md calls pure.
const PURE: [&str; 12] = [
    "promtext",
    "catalog",
    "openai",
    "engine",
    "rng",
    "results",
    "workload",
    "analysis",
    "report",
    "promql",
    "manifests",
    "autoscale",
];

/// The names in `[dependencies]` of a Cargo.toml's text (not dev- or build-dependencies).
fn dependencies(toml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside && let Some((name, _)) = line.split_once(['=', '.']) {
            let name = name.trim();
            if !name.is_empty() && !name.starts_with('#') {
                out.push(name.to_owned());
            }
        }
    }
    out
}

#[test]
fn pure_crates_never_depend_on_tokio_hyper_clap_or_an_io_crate() {
    let io = [
        "tokio",
        "hyper",
        "hyper-util",
        "clap",
        "inferscale-clock",
        "inferscale-http",
        "inferscale-loadgen",
        "inferscale-sim",
        "inferscale-scaler",
        "inferscale-monitor",
        "inferscale-check",
    ];
    let mut wrong = Vec::new();
    for c in PURE {
        let path = root().join("crates").join(c).join("Cargo.toml");
        let toml = std::fs::read_to_string(&path).expect("a pure crate's Cargo.toml");
        for d in dependencies(&toml) {
            if io.contains(&d.as_str()) {
                wrong.push(format!("{c} depends on {d}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_readers_of_servers_share_the_http_client_not_the_load_generator() {
    let mut wrong = Vec::new();
    for c in ["scaler", "monitor", "check", "sim"] {
        let path = root().join("crates").join(c).join("Cargo.toml");
        let toml = std::fs::read_to_string(&path).expect("a crate's Cargo.toml");
        let deps = dependencies(&toml);
        if deps.iter().any(|d| d == "inferscale-loadgen") {
            wrong.push(format!("{c} depends on inferscale-loadgen"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The signatures and types in `text` (up to its test module) that are a `Result` whose
/// error is a bare `String`: `(line, text)`.
fn string_errors(text: &str) -> Vec<(usize, String)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for (start, _) in code.match_indices("Result<") {
        // The generic arguments, to the matching `>`.
        let mut depth = 0;
        let mut end = None;
        for (i, c) in code[start + 6..].char_indices() {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(start + 6 + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        let args = &code[start + 7..end];
        // The last top-level argument is the error.
        let mut depth = 0;
        let mut last = 0;
        for (i, c) in args.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last = i + 1,
                _ => {}
            }
        }
        if last > 0 && args[last..].trim() == "String" {
            let line = code[..start].matches('\n').count() + 1;
            out.push((
                line,
                code[start..=end]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            ));
        }
    }
    out
}

#[test]
fn the_string_error_finder_finds_them_and_nothing_else() {
    let found = string_errors(
        "fn a() -> Result<u8, String> {}\nfn b() -> Result<BTreeMap<String, String>, E> {}\nfn c() -> Result<(u8, String),\n    String> {}\n#[cfg(test)]\nfn d() -> Result<(), String> {}\n",
    );
    assert_eq!(
        found,
        [
            (1, "Result<u8, String>".to_owned()),
            (3, "Result<(u8, String), String>".to_owned())
        ]
    );
}

/// `find` over every library source under `crates/*/src` outside the crates `except` names:
/// each finding as `path:line: text`.
fn in_library_code(except: &str, find: fn(&str) -> Vec<(usize, String)>) -> Vec<String> {
    let mut files = Vec::new();
    sources(&root().join("crates"), &mut files);
    let mut found = Vec::new();
    let mut read = 0;
    for f in files {
        let rel = f.strip_prefix(root()).unwrap_or(&f).to_path_buf();
        let lib = rel
            .components()
            .nth(2)
            .is_some_and(|c| c.as_os_str() == "src")
            && !rel.starts_with(except);
        if !lib {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("a source file");
        read += 1;
        for (line, what) in find(&text) {
            found.push(format!("{}:{line}: {what}", rel.display()));
        }
    }
    assert!(read > 100, "only {read} library sources found");
    found
}

#[test]
fn library_code_has_no_string_errors() {
    // The binary's clap value parsers answer clap, which takes any message; tests may do as
    // they like.
    let found = in_library_code("crates/cli", string_errors);
    assert!(
        found.is_empty(),
        "a library error is a type, not a String: {found:#?}"
    );
}

/// The places in `text` (up to its test module, comments aside) that read a clock other than
/// through `inferscale_clock`: the standard library's `Instant` or `SystemTime::now`, or
/// tokio's `Instant` named directly: `(line, text)`.
fn clock_reads(text: &str) -> Vec<(usize, String)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let std_instant = line.contains("std::time::Instant")
            || (line.contains("use std::time::")
                && line
                    .split(['{', '}', ',', ':', ';', ' '])
                    .any(|w| w == "Instant"));
        if std_instant || line.contains("SystemTime::now") || line.contains("tokio::time::Instant")
        {
            out.push((i + 1, line.trim().to_owned()));
        }
    }
    out
}

#[test]
fn the_clock_read_finder_finds_them_and_nothing_else() {
    let found = clock_reads(
        "use std::time::{Duration, Instant};\nuse inferscale_clock::Instant;\nlet t = SystemTime::now();\n// std::time::Instant in prose\nlet u = tokio::time::Instant::now();\nuse std::time::{Duration, SystemTime};\n#[cfg(test)]\nlet v = std::time::Instant::now();\n",
    );
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [1, 3, 5]);
}

#[test]
fn library_code_reads_the_clock_only_through_the_seam() {
    // The seam itself is exempt; tests may do as they like. (bench/ is outside crates/: a
    // benchmark's stopwatch is the machine's clock by definition.)
    let found = in_library_code("crates/clock", clock_reads);
    assert!(
        found.is_empty(),
        "read the clock through inferscale_clock (its Instant, now, wall): {found:#?}"
    );
}

/// The functions of `text` (up to its test module) longer than `max` lines, with whether a
/// `// Long:` comment stands among the lines just above them: `(name, lines, reason)`.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, bool)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let rest = ["pub ", "pub(crate) ", "pub(super) ", "async ", "const "]
            .iter()
            .fold(t, |s, p| s.strip_prefix(p).unwrap_or(s));
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        let Some(sig) = rest.strip_prefix("fn ") else {
            continue;
        };
        let name: String = sig
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body opens where the signature ends; a declaration has none.
        let Some(open) = (i..lines.len()).find(|&j| {
            let l = lines[j].trim_end();
            l.ends_with('{') || l.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{}}}", " ".repeat(indent));
        let Some(end) = (open + 1..lines.len()).find(|&j| lines[j].trim_end() == close) else {
            continue;
        };
        let n = end - i + 1;
        if n > max {
            let reason = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let l = l.trim_start();
                    l.starts_with("//") || l.starts_with("#[")
                })
                .any(|l| l.trim_start().starts_with("// Long:"));
            out.push((name, n, reason));
        }
    }
    out
}

#[test]
fn the_long_function_finder_measures_bodies_and_sees_reasons() {
    let body = |n: usize| "    x();\n".repeat(n);
    let text = format!(
        "/// Doc.\n// Long: a table.\npub fn a() {{\n{}}}\n\nfn b(\n    x: u8,\n) -> u8 {{\n{}}}\n\nfn c() {{\n{}}}\ntrait T {{\n    fn d(&self);\n}}\n",
        body(10),
        body(10),
        body(2)
    );
    assert_eq!(
        long_functions(&text, 5),
        [("a".to_owned(), 12, true), ("b".to_owned(), 14, false)]
    );
}

#[test]
fn no_function_is_over_150_lines_without_a_reason_written_above_it() {
    let mut files = Vec::new();
    sources(&root().join("crates"), &mut files);
    let mut unexplained = Vec::new();
    for f in files {
        let rel = f.strip_prefix(root()).unwrap_or(&f).to_path_buf();
        if rel
            .components()
            .nth(2)
            .is_none_or(|c| c.as_os_str() != "src")
        {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("a source file");
        for (name, n, reason) in long_functions(&text, 150) {
            if !reason {
                unexplained.push(format!("{}: {name} ({n} lines)", rel.display()));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "split these, or say above each why it is long (`// Long: …`): {unexplained:#?}"
    );
}
