//! Keeping only some families of an exposition before it is parsed: a reader that needs two
//! families of vLLM's sixty (the KEDA external scaler, say) skips the cost of the rest.

/// The suffixes a sample's name may carry after its family's name.
const SUFFIXES: [&str; 8] = [
    "_bucket", "_count", "_sum", "_total", "_created", "_gcount", "_gsum", "_info",
];

/// The lines of `text` that belong to the families `names`: `HELP`, `TYPE` and `UNIT`
/// lines and samples by the name they give, or that name without one of the histogram,
/// summary and counter suffixes (`vllm:prompt_tokens` keeps `vllm:prompt_tokens_total` and
/// its `_created`). Other comments and blank lines are dropped, `# EOF` is kept; a sample
/// whose name is quoted (the UTF-8 names of newer formats) is kept, for the parser to
/// judge. The result parses as `text` would, restricted to those families. Names are
/// compared as bytes: nothing is decoded that is not kept.
///
/// ```
/// let text = b"# TYPE a gauge\na 1\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 3\n";
/// let kept = inferscale_promtext::retain_families(text, &["h"]);
/// assert_eq!(kept, b"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 3\n");
/// ```
pub fn retain_families(text: &[u8], names: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 8);
    let mut at = 0;
    while at < text.len() {
        let end = memchr::memchr(b'\n', &text[at..]).map_or(text.len(), |i| at + i + 1);
        let line = &text[at..end];
        at = end;
        let l = trim_start(line);
        let kept = match l.first() {
            None | Some(b'\n' | b'\r') => false,
            Some(b'#') => {
                let rest = trim_start(&l[1..]);
                if rest.starts_with(b"EOF") {
                    true
                } else {
                    let mut words = rest
                        .split(|b| matches!(b, b' ' | b'\t'))
                        .filter(|w| !w.is_empty());
                    match (words.next(), words.next()) {
                        (Some(b"HELP" | b"TYPE" | b"UNIT"), Some(name)) => {
                            is_family(trim_end(name), names)
                        }
                        _ => false,
                    }
                }
            }
            Some(b'{') => true,
            Some(_) => {
                let stop = l
                    .iter()
                    .position(|b| matches!(b, b'{' | b' ' | b'\t' | b'\r' | b'\n'))
                    .unwrap_or(l.len());
                is_family(&l[..stop], names)
            }
        };
        if kept {
            out.extend_from_slice(line);
            if !line.ends_with(b"\n") {
                out.push(b'\n');
            }
        }
    }
    out
}

/// Whether the name `name` is of one of the families `names`: the same, or with a suffix
/// after it (a 0.0.4 counter's family is named with its `_total`, its `_created` is a family
/// of its own). Lengths are compared before bytes, so most names cost no comparison.
fn is_family(name: &[u8], names: &[&str]) -> bool {
    let hit = |c: &[u8]| {
        names
            .iter()
            .any(|n| n.len() == c.len() && n.as_bytes() == c)
    };
    hit(name)
        || SUFFIXES.iter().any(|s| {
            name.len() > s.len()
                && name.ends_with(s.as_bytes())
                && hit(&name[..name.len() - s.len()])
        })
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| **c == b' ' || **c == b'\t').count();
    &b[n..]
}

fn trim_end(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rev()
        .take_while(|c| matches!(c, b'\n' | b'\r' | b' ' | b'\t'))
        .count();
    &b[..b.len() - n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_families_parse_as_they_did_in_the_whole_exposition() {
        let text = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/vllm/metrics_single_engine.prom"
        ))
        .unwrap_or_default();
        assert!(!text.is_empty());
        let kept = retain_families(
            &text,
            &[
                "vllm:num_requests_waiting",
                "vllm:request_queue_time_seconds",
                "vllm:prompt_tokens",
            ],
        );
        let whole = crate::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let part = crate::parse(&kept).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = part.families().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "vllm:num_requests_waiting",
                "vllm:prompt_tokens_total",
                "vllm:prompt_tokens_created",
                "vllm:request_queue_time_seconds",
                "vllm:request_queue_time_seconds_created"
            ]
        );
        for f in part.families() {
            let w = whole
                .family(f.name())
                .unwrap_or_else(|| panic!("{}", f.name()));
            let a: Vec<(String, f64)> = f
                .samples()
                .map(|s| (s.name().to_owned(), s.value()))
                .collect();
            let b: Vec<(String, f64)> = w
                .samples()
                .map(|s| (s.name().to_owned(), s.value()))
                .collect();
            assert_eq!(a, b, "{}", f.name());
        }
        assert!(
            kept.len() * 5 < text.len(),
            "{} of {} bytes",
            kept.len(),
            text.len()
        );
    }
}
