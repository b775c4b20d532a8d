//! The three ways to print a checklist: a table for people, JSON for scripts, JUnit XML for
//! CI systems (each check a test case: a failed check a `<failure>`, a skipped one
//! `<skipped>`, a warning a pass with its text in `<system-out>`, or a failure under
//! `--fail-on warn`).

use std::fmt::Write as _;

use crate::{FailOn, Outcome, Status};

/// The table: one line per check, the reason under it, the fix under that.
pub fn human(outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    for o in outcomes {
        let tag = match o.status {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skipped => "skip",
        };
        let _ = writeln!(s, "{:>2}  {tag}  {:<27} {}", o.id, o.name, o.title);
        let _ = writeln!(s, "{:10}{}", "", o.reason);
        if let Some(f) = &o.fix {
            let _ = writeln!(s, "{:10}fix: {f}", "");
        }
    }
    let count = |st: Status| outcomes.iter().filter(|o| o.status == st).count();
    let _ = writeln!(
        s,
        "\n{} passed, {} warned, {} failed, {} skipped",
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Skipped)
    );
    s
}

/// `{"version": 1, "checks": [{"id", "name", "title", "status", "reason", "fix"}], "summary"}`.
pub fn json(outcomes: &[Outcome]) -> serde_json::Value {
    let count = |st: Status| outcomes.iter().filter(|o| o.status == st).count();
    serde_json::json!({
        "version": 1,
        "checks": outcomes,
        "summary": {
            "pass": count(Status::Pass),
            "warn": count(Status::Warn),
            "fail": count(Status::Fail),
            "skipped": count(Status::Skipped),
        },
    })
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no form for most control characters.
            c if c.is_control() && !matches!(c, '\n' | '\t') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML, as Jenkins, GitLab and GitHub's test reporters read it.
pub fn junit(outcomes: &[Outcome], on: FailOn) -> String {
    let failing = |o: &Outcome| match on {
        FailOn::Fail => o.status == Status::Fail,
        FailOn::Warn => o.status >= Status::Warn,
    };
    let failures = outcomes.iter().filter(|o| failing(o)).count();
    let skipped = outcomes
        .iter()
        .filter(|o| o.status == Status::Skipped)
        .count();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"inferscale check\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">",
        outcomes.len()
    );
    let _ = writeln!(
        s,
        "  <testsuite name=\"production-readiness\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">",
        outcomes.len()
    );
    for o in outcomes {
        let _ = write!(
            s,
            "    <testcase classname=\"inferscale.check\" name=\"{:02} {}: {}\"",
            o.id,
            o.name,
            xml(o.title)
        );
        let body = o.fix.as_deref().map_or_else(
            || xml(&o.reason),
            |f| format!("{}\nfix: {}", xml(&o.reason), xml(f)),
        );
        if failing(o) {
            let _ = writeln!(
                s,
                ">\n      <failure message=\"{}\" type=\"{}\">{body}</failure>\n    </testcase>",
                xml(&o.reason),
                o.status.as_str()
            );
        } else if o.status == Status::Skipped {
            let _ = writeln!(
                s,
                ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                xml(&o.reason)
            );
        } else {
            let _ = writeln!(
                s,
                ">\n      <system-out>{}: {body}</system-out>\n    </testcase>",
                o.status.as_str()
            );
        }
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Check;

    fn outcomes() -> Vec<Outcome> {
        vec![
            Outcome::new(Check::MetricsExposed, Status::Pass, "ok".into(), None),
            Outcome::new(
                Check::Alerts,
                Status::Fail,
                "missing <PreemptionSpike> & co".into(),
                Some("add it".into()),
            ),
            Outcome::new(
                Check::VllmMemory,
                Status::Warn,
                "0.9".into(),
                Some("0.85".into()),
            ),
            Outcome::new(Check::ScaleCycle, Status::Skipped, "no input".into(), None),
        ]
    }

    #[test]
    fn junit_counts_failures_by_the_fail_on_rule_and_escapes() {
        let x = junit(&outcomes(), FailOn::Fail);
        assert!(
            x.contains("tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"1\""),
            "{x}"
        );
        assert!(
            x.contains("missing &lt;PreemptionSpike&gt; &amp; co"),
            "{x}"
        );
        assert!(
            x.contains("name=\"05 alerts: the five alerts present and valid\""),
            "{x}"
        );
        assert_eq!(x.matches("<testcase").count(), 4);
        let x = junit(&outcomes(), FailOn::Warn);
        assert!(x.contains("failures=\"2\""), "{x}");
    }

    #[test]
    fn json_has_every_field_and_a_summary() {
        let j = json(&outcomes());
        assert_eq!(j["checks"][1]["id"], 5);
        assert_eq!(j["checks"][1]["name"], "alerts");
        assert_eq!(j["checks"][1]["status"], "fail");
        assert_eq!(j["checks"][0]["fix"], serde_json::Value::Null);
        assert_eq!(j["summary"]["fail"], 1);
        let h = human(&outcomes());
        assert!(h.contains(" 5  FAIL  alerts"), "{h}");
        assert!(h.contains("fix: add it"), "{h}");
    }
}
