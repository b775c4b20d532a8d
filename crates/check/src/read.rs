//! Reading what the checks look at on disk: a manifests folder (every YAML and JSON file,
//! each document classified by what it is, whatever its file name) and an `inferscale run`
//! folder. Files are bounded in number and size; one that cannot be read is reported, not
//! fatal.

use std::path::{Path, PathBuf};

use inferscale_manifests::objects::{self};
use inferscale_manifests::objects::{Deployment, DeploymentPatch, Job, JsonPatch};

use crate::ReadError;
use crate::evidence::{Doc, Found, Manifests, RunDir};

/// The most files a manifests folder is read for.
pub const MAX_FILES: usize = 500;
/// The largest file read (a dashboard is well under a megabyte).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The documents of one file's text (`name` says whether it is JSON).
///
/// # Errors
///
/// When the text is not JSON or YAML, or an object is not what its kind says.
pub fn classify(name: &str, text: &str) -> Result<Vec<Doc>, ReadError> {
    if name.ends_with(".json") {
        let v: serde_json::Value = serde_json::from_str(text).map_err(ReadError::NotJson)?;
        // A dashboard as Grafana exports it, or wrapped as its HTTP API takes it.
        let d = v.get("dashboard").filter(|d| d.is_object()).unwrap_or(&v);
        if d.get("panels").is_some() {
            return Ok(vec![Doc::Dashboard {
                title: d
                    .get("title")
                    .and_then(|t| t.as_str())
                    .unwrap_or("")
                    .to_owned(),
                queries: inferscale_manifests::queries_in(d),
            }]);
        }
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for doc in inferscale_manifests::yaml_documents(text) {
        let v: serde_json::Value =
            inferscale_manifests::yaml::from_str(doc).map_err(ReadError::NotYaml)?;
        let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        let typed = ReadError::Object;
        match kind {
            "ScaledObject" => out.push(Doc::ScaledObject(v)),
            "PrometheusRule" => out.push(Doc::Rules(
                inferscale_autoscale::alerts::read_rules(doc).map_err(ReadError::Rules),
            )),
            "Deployment" => {
                let d: Deployment = objects::load(doc).map_err(typed)?;
                out.push(Doc::PodTemplate {
                    patch: false,
                    template: Box::new(d.spec.template),
                });
            }
            "Job" => {
                let j: Job = objects::load(doc).map_err(typed)?;
                out.push(Doc::Job(Box::new(j.spec.template)));
            }
            "" if v.get("groups").is_some() => out.push(Doc::Rules(
                inferscale_autoscale::alerts::read_rules(doc).map_err(ReadError::Rules),
            )),
            "" if v.pointer("/spec/template").is_some() => {
                let p: DeploymentPatch = objects::load(doc).map_err(typed)?;
                out.push(Doc::PodTemplate {
                    patch: true,
                    template: Box::new(p.spec.template),
                });
            }
            "" if v
                .as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(|o| o.get("op").is_some())) =>
            {
                let p: JsonPatch = objects::load(doc).map_err(typed)?;
                out.push(Doc::JsonPatch(p));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        if out.len() >= MAX_FILES {
            break;
        }
        let p = e.path();
        let t = e.file_type()?;
        if t.is_dir() && depth < 4 {
            files_under(&p, out, depth + 1)?;
        } else if t.is_file()
            && p.extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        {
            out.push(p);
        }
    }
    Ok(())
}

/// Reads every YAML and JSON file under `dir` (four levels deep at most).
///
/// # Errors
///
/// When `dir` is not a readable folder.
pub fn manifests(dir: &Path) -> Result<Manifests, ReadError> {
    if !dir.is_dir() {
        return Err(ReadError::NotFolder(dir.to_owned()));
    }
    let mut files = Vec::new();
    files_under(dir, &mut files, 0).map_err(|error| ReadError::List {
        dir: dir.to_owned(),
        error,
    })?;
    let mut m = Manifests {
        dir: dir.to_owned(),
        ..Manifests::default()
    };
    for f in files {
        let name = f.strip_prefix(dir).unwrap_or(&f).display().to_string();
        let text = match read_bounded(&f) {
            Ok(t) => t,
            Err(e) => {
                m.unreadable.push((name, e));
                continue;
            }
        };
        match classify(&name, &text) {
            Ok(docs) => m.docs.extend(docs.into_iter().map(|doc| Found {
                path: name.clone(),
                doc,
            })),
            Err(e) => m.unreadable.push((name, e)),
        }
    }
    Ok(m)
}

/// A regular file's text, at most [`MAX_FILE_BYTES`].
///
/// # Errors
///
/// When it cannot be read, is not a regular file, is larger, or is not UTF-8.
pub fn read_bounded(path: &Path) -> Result<String, ReadError> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path).map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegularFile);
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

/// Reads an `inferscale run` folder's `thresholds.json` and `rehearsal.json`.
pub fn run_dir(dir: &Path) -> RunDir {
    let read = |name: &str| {
        let p = dir.join(name);
        p.exists().then(|| read_bounded(&p))
    };
    RunDir {
        dir: dir.to_owned(),
        thresholds: read("thresholds.json").map(|r| {
            r.and_then(|t| inferscale_analysis::read_thresholds(&t).map_err(ReadError::Thresholds))
        }),
        rehearsal: read("rehearsal.json")
            .map(|r| r.and_then(|t| serde_json::from_str(&t).map_err(ReadError::NotJson))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_classified_by_what_they_hold_not_their_file_name() {
        let docs = classify(
            "x.yaml",
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: a}\nspec: {scaleTargetRef: {name: v}, triggers: []}\n---\ngroups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n---\n- op: add\n  path: /spec/template/spec/containers/0/args/-\n  value: --max-model-len=4096\n---\nspec:\n  template:\n    metadata:\n      annotations: {karpenter.sh/do-not-disrupt: \"true\"}\n",
        )
        .unwrap();
        assert!(matches!(docs[0], Doc::ScaledObject(_)));
        assert!(matches!(&docs[1], Doc::Rules(Ok(r)) if r.rules[0].name == "A"));
        assert!(matches!(&docs[2], Doc::JsonPatch(p) if p.len() == 1));
        assert!(matches!(&docs[3], Doc::PodTemplate { patch: true, .. }));
        let d = classify(
            "d.json",
            r#"{"dashboard": {"title": "T", "panels": [{"targets": [{"expr": "up"}]}]}}"#,
        )
        .unwrap();
        assert!(
            matches!(&d[0], Doc::Dashboard { title, queries } if title == "T" && queries == &["up"])
        );
        assert!(classify("x.yaml", "a: [").is_err());
    }
}
