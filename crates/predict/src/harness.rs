//! What is known about the load generators behind published measurements: how they space
//! requests, when they give up, which prompts they repeat, and how they count tokens. A
//! case file records the GPU, the model and the rate, but a measurement also depends on
//! these, and a source's own notes can be wrong about them (inference-perf's "constant"
//! timer draws exponential gaps). The facts are data (`data/harnesses.csv`), each row with
//! the evidence for it; they fill only what a case leaves empty, so a case file's own
//! columns always win.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::fidelity::{COLUMNS, Case, OPTIONAL_COLUMNS};

/// The columns a harness cannot fill: what identifies a case and what was measured.
const NOT_FACTS: [&str; 7] = [
    "id",
    "source",
    "metric",
    "value",
    "unit",
    "confidence",
    "notes",
];

/// Whether a harness may fill `col`: a case's setup or workload column.
fn fillable(col: &str) -> bool {
    (COLUMNS.contains(&col) && !NOT_FACTS.contains(&col)) || OPTIONAL_COLUMNS.contains(&col)
}

/// The shipped table.
const BUILTIN: &str = include_str!("../data/harnesses.csv");

/// One harness: which sources it produced, and what it did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Harness {
    /// Its name in reports.
    pub name: String,
    /// A case is this harness's when its `source` contains this …
    pub source_contains: String,
    /// … and this (empty: anything).
    pub and_contains: String,
    /// Columns it fills (setup and workload columns) and their values.
    pub facts: BTreeMap<String, String>,
    /// Where the facts come from.
    pub evidence: String,
}

impl Harness {
    fn matches(&self, source: &str) -> bool {
        source.contains(&self.source_contains)
            && (self.and_contains.is_empty() || source.contains(&self.and_contains))
    }
}

/// The harnesses this build knows.
pub fn builtin() -> Vec<Harness> {
    parse(BUILTIN).expect("data/harnesses.csv is checked by a test")
}

/// A harness table that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    /// Not CSV.
    #[error(transparent)]
    Csv(#[from] crate::csv::CsvError),
    /// Not even a header.
    #[error("no header")]
    NoHeader,
    /// A column that is not a harness's.
    #[error("unknown column {0:?}")]
    UnknownColumn(String),
    /// A row without its name or what its source contains.
    #[error("line {0}: name and source_contains are required")]
    Unnamed(usize),
}

/// Reads a harness table: columns `name`, `source_contains`, `and_contains`, `evidence`, and
/// any setup or workload column of a case (those of [`COLUMNS`] but the case's identity and
/// measurement, and [`OPTIONAL_COLUMNS`]).
///
/// # Errors
///
/// A column that is none of these, or a row without `name` or `source_contains`.
pub fn parse(text: &str) -> Result<Vec<Harness>, HarnessError> {
    let mut rows = crate::csv::rows(text)?.into_iter();
    let (_, header) = rows.next().ok_or(HarnessError::NoHeader)?;
    for h in &header {
        let known = ["name", "source_contains", "and_contains", "evidence"].contains(&h.as_str())
            || fillable(h);
        if !known {
            return Err(HarnessError::UnknownColumn(h.clone()));
        }
    }
    let mut out = Vec::new();
    for (line, r) in rows {
        let mut f: BTreeMap<String, String> = header.iter().cloned().zip(r).collect();
        let mut take = |k: &str| f.remove(k).unwrap_or_default().trim().to_owned();
        let name = take("name");
        let source_contains = take("source_contains");
        let and_contains = take("and_contains");
        let evidence = take("evidence");
        if name.is_empty() || source_contains.is_empty() {
            return Err(HarnessError::Unnamed(line));
        }
        let facts = f
            .into_iter()
            .map(|(k, v)| (k, v.trim().to_owned()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        out.push(Harness {
            name,
            source_contains,
            and_contains,
            facts,
            evidence,
        });
    }
    Ok(out)
}

/// One harness applied: to how many cases, with which facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Applied {
    /// The harness's name.
    pub name: String,
    /// Cases whose source it matched.
    pub cases: usize,
    /// Its facts.
    pub facts: BTreeMap<String, String>,
    /// Where they come from.
    pub evidence: String,
}

/// Fills the optional columns each case leaves empty from the harnesses its source matches
/// (a later row's fact wins over an earlier one's; the case's own value over both), and says
/// which harnesses applied.
pub fn apply(cases: &mut [Case], harnesses: &[Harness]) -> Vec<Applied> {
    let mut applied: Vec<Applied> = Vec::new();
    for c in cases.iter_mut() {
        let source = c.get("source").to_owned();
        let mut fill: BTreeMap<&str, &str> = BTreeMap::new();
        for h in harnesses.iter().filter(|h| h.matches(&source)) {
            for (k, v) in &h.facts {
                fill.insert(k, v);
            }
            match applied.iter_mut().find(|a| a.name == h.name) {
                Some(a) => a.cases += 1,
                None => applied.push(Applied {
                    name: h.name.clone(),
                    cases: 1,
                    facts: h.facts.clone(),
                    evidence: h.evidence.clone(),
                }),
            }
        }
        for (k, v) in fill {
            if c.get(k).is_empty() {
                c.fields.insert(k.to_owned(), v.to_owned());
            }
        }
    }
    applied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(source: &str, extra: &[(&str, &str)]) -> Case {
        let mut fields = BTreeMap::from([("source".to_owned(), source.to_owned())]);
        for (k, v) in extra {
            fields.insert((*k).to_owned(), (*v).to_owned());
        }
        Case { line: 2, fields }
    }

    #[test]
    fn the_shipped_table_reads_and_every_row_has_evidence_and_facts() {
        let hs = builtin();
        assert!(hs.len() >= 3);
        for h in &hs {
            assert!(!h.evidence.is_empty(), "{}", h.name);
            assert!(!h.facts.is_empty(), "{}", h.name);
        }
    }

    #[test]
    fn facts_fill_only_empty_columns_and_later_rows_win() {
        let hs = parse(
            "name,source_contains,and_contains,arrivals,timeout_s,evidence\n\
             a,example.org/,,poisson,300,x\n\
             b,example.org/,-slow/,,600,y\n",
        )
        .unwrap();
        let mut cases = vec![
            case("https://example.org/run-slow/r.json", &[]),
            case(
                "https://example.org/run-fast/r.json",
                &[("arrivals", "constant")],
            ),
            case("https://other.org/", &[]),
        ];
        let applied = apply(&mut cases, &hs);
        assert_eq!(cases[0].get("arrivals"), "poisson");
        assert_eq!(cases[0].get("timeout_s"), "600");
        assert_eq!(cases[1].get("arrivals"), "constant");
        assert_eq!(cases[1].get("timeout_s"), "300");
        assert_eq!(cases[2].get("arrivals"), "");
        assert_eq!(
            applied
                .iter()
                .map(|a| (a.name.as_str(), a.cases))
                .collect::<Vec<_>>(),
            [("a", 2), ("b", 1)]
        );
    }

    #[test]
    fn an_unknown_column_is_named() {
        let e = parse("name,source_contains,colour\n").unwrap_err();
        assert_eq!(e, HarnessError::UnknownColumn("colour".into()));
        assert!(e.to_string().contains("\"colour\""), "{e}");
        // What was measured is never a harness's fact.
        assert!(parse("name,source_contains,value\n").is_err());
        assert!(parse("name,source_contains,output_len,load_values\n").is_ok());
    }
}
