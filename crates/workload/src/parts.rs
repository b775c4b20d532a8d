//! Parts of a split load in a stream: the framed text a worker prints to stdout so that
//! `kubectl logs` carries its part out of a pod (`inferscale load --emit-part`), and reading
//! parts back from what `inferscale merge -` gets on stdin — the workers' logs one after the
//! other, or a tar archive of part files.
//!
//! A frame is a `BEGIN` line naming the part and its length in bytes, the part in base64
//! (76 characters a line), and an `END` line:
//!
//! ```text
//! -----BEGIN INFERSCALE PART part-2.json 48213-----
//! ewogICJ2ZXJzaW9uIjogMSwK...
//! -----END INFERSCALE PART-----
//! ```
//!
//! Reading is liberal where logs differ: a prefix before the frame's lines (`kubectl logs
//! --prefix` or `--timestamps`) is ignored, and so are lines outside frames. It is strict
//! where a part could be damaged: a frame cut short, a line of it that is not base64, or a
//! length that differs from the `BEGIN` line is an error naming the part.

use std::io::Read as _;

use crate::hdr::{base64_decode, base64_encode};

const BEGIN: &str = "-----BEGIN INFERSCALE PART ";
const END: &str = "-----END INFERSCALE PART-----";
const LINE: usize = 76;

/// One part found in a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Its name: the frame's, or the tar entry's path.
    pub name: String,
    /// Its bytes (a `run.json`).
    pub contents: Vec<u8>,
}

/// Why a stream's parts could not be read. Each names the part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartsError {
    /// A frame with no `END` line: the worker's log was cut short.
    #[error("{name}: the part ends before its END line (the worker's log was cut short)")]
    Unterminated {
        /// The part.
        name: String,
    },
    /// A line inside a frame that is not base64.
    #[error("{name}: line {line} of the stream, inside the part, is not base64")]
    Garbled {
        /// The part.
        name: String,
        /// 1-based line of the stream.
        line: usize,
    },
    /// The part's length differs from its `BEGIN` line's.
    #[error("{name}: {got} bytes, but its BEGIN line says {want}")]
    Length {
        /// The part.
        name: String,
        /// Bytes decoded.
        got: usize,
        /// Bytes announced.
        want: usize,
    },
    /// A `BEGIN` line without a name and a length.
    #[error("line {line}: a BEGIN line without a part name and length")]
    Header {
        /// 1-based line of the stream.
        line: usize,
    },
    /// A tar archive that ends inside an entry, or an entry this reader does not take.
    #[error("tar archive: {0}")]
    Tar(String),
    /// A compressed stream.
    #[error(
        "the input is gzip-compressed: decompress it first (gunzip -c FILE | inferscale merge -)"
    )]
    Gzip,
    /// Nothing that holds a part.
    #[error(
        "the input holds no parts: neither a tar archive of run.json files nor the output of `inferscale load --emit-part` (kubectl logs of the workers)"
    )]
    Empty,
}

/// `contents` as a frame named `name` (spaces in the name become `_`).
pub fn frame(name: &str, contents: &[u8]) -> String {
    let name: String = name
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    let b64 = base64_encode(contents);
    let mut out = String::with_capacity(b64.len() + b64.len() / LINE + 100);
    out.push_str(&format!("{BEGIN}{name} {}-----\n", contents.len()));
    for chunk in b64.as_bytes().chunks(LINE) {
        // base64 is ASCII.
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// The parts in `bytes`: a tar archive's `*.json` files, or the frames of a text stream.
pub fn read(bytes: &[u8]) -> Result<Vec<Part>, PartsError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(PartsError::Gzip);
    }
    let parts = if bytes.len() >= 512 && &bytes[257..262] == b"ustar" {
        read_tar(bytes)?
    } else {
        read_frames(&String::from_utf8_lossy(bytes))?
    };
    if parts.is_empty() {
        return Err(PartsError::Empty);
    }
    Ok(parts)
}

fn is_base64(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || c == b'=')
}

fn read_frames(text: &str) -> Result<Vec<Part>, PartsError> {
    let mut parts = Vec::new();
    // The frame being read: name, announced length, base64 so far.
    let mut open: Option<(String, usize, String)> = None;
    // A data line shorter than a full one: only the last may be (a log line that strayed
    // into the frame is one).
    let mut short: Option<usize> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if let Some(at) = line.find(BEGIN) {
            if let Some((name, ..)) = open.take() {
                return Err(PartsError::Unterminated { name });
            }
            let head = line[at + BEGIN.len()..].trim_end_matches('-');
            let (name, len) = head
                .rsplit_once(' ')
                .and_then(|(name, len)| Some((name.trim(), len.parse::<usize>().ok()?)))
                .filter(|(name, _)| !name.is_empty())
                .ok_or(PartsError::Header { line: n + 1 })?;
            open = Some((name.to_owned(), len, String::new()));
            short = None;
            continue;
        }
        let Some((name, want, b64)) = &mut open else {
            continue;
        };
        if line.contains(END) {
            let contents = base64_decode(b64).map_err(|_| PartsError::Garbled {
                name: name.clone(),
                line: n + 1,
            })?;
            if contents.len() != *want {
                return Err(PartsError::Length {
                    name: name.clone(),
                    got: contents.len(),
                    want: *want,
                });
            }
            parts.push(Part {
                name: std::mem::take(name),
                contents,
            });
            open = None;
            continue;
        }
        // The data is the line's last word: whatever a log reader put before it is not.
        let word = line.rsplit(char::is_whitespace).next().unwrap_or("");
        if !is_base64(word) || word.len() > LINE {
            return Err(PartsError::Garbled {
                name: name.clone(),
                line: n + 1,
            });
        }
        if let Some(line) = short {
            return Err(PartsError::Garbled {
                name: name.clone(),
                line,
            });
        }
        if word.len() < LINE {
            short = Some(n + 1);
        }
        b64.push_str(word);
    }
    match open {
        Some((name, ..)) => Err(PartsError::Unterminated { name }),
        None => Ok(parts),
    }
}

/// The regular `*.json` files of a ustar, GNU or pax archive, read with the `tar` crate
/// (GNU long names and pax `path` records are honoured, checksums checked); other entries
/// are skipped.
fn read_tar(bytes: &[u8]) -> Result<Vec<Part>, PartsError> {
    let mut archive = tar::Archive::new(bytes);
    let entries = archive
        .entries()
        .map_err(|e| PartsError::Tar(e.to_string()))?;
    let mut parts = Vec::new();
    for (k, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| PartsError::Tar(format!("entry {}: {e}", k + 1)))?;
        let name = entry
            .path()
            .map_err(|e| PartsError::Tar(format!("entry {}: {e}", k + 1)))?
            .to_string_lossy()
            .into_owned();
        if !entry.header().entry_type().is_file() || !name.ends_with(".json") {
            continue;
        }
        let size = entry.size();
        // The reader is the archive in memory: what it holds bounds what is allocated.
        let mut contents = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(bytes.len()));
        entry
            .read_to_end(&mut contents)
            .map_err(|e| PartsError::Tar(format!("{name}: {e}")))?;
        if contents.len() as u64 != size {
            return Err(PartsError::Tar(format!(
                "{name}: the archive ends inside it ({} of {size} bytes)",
                contents.len()
            )));
        }
        parts.push(Part {
            name: name.trim_start_matches("./").to_owned(),
            contents,
        });
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(n: usize) -> Vec<u8> {
        format!("{{\"part\": {n}, \"pad\": \"{}\"}}", "x".repeat(n * 37)).into_bytes()
    }

    #[test]
    fn frames_round_trip_through_logs_with_prefixes_and_noise() {
        let mut logs = String::new();
        for k in 0..3 {
            logs.push_str("sending 120 requests from 18:00:00\nstep 1: 40 req/s\n");
            let f = frame(&format!("part-{k}.json"), &json(k + 1));
            if k == 1 {
                // kubectl logs --timestamps puts a time before every line.
                for l in f.lines() {
                    logs.push_str(&format!("2026-12-02T18:00:0{k}.123Z {l}\n"));
                }
            } else {
                logs.push_str(&f);
            }
        }
        let parts = read(logs.as_bytes()).unwrap();
        assert_eq!(parts.len(), 3);
        for (k, p) in parts.iter().enumerate() {
            assert_eq!(p.name, format!("part-{k}.json"));
            assert_eq!(p.contents, json(k + 1));
        }
    }

    #[test]
    fn a_damaged_frame_is_refused_naming_the_part() {
        let f = frame("part-0.json", &json(40));
        let cut: String = f.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert_eq!(
            read(cut.as_bytes()),
            Err(PartsError::Unterminated {
                name: "part-0.json".into()
            })
        );
        let noisy = f.replacen('\n', "\nwarning: late by 3 s\n", 1);
        assert!(matches!(
            read(noisy.as_bytes()),
            Err(PartsError::Garbled { name, line: 2 }) if name == "part-0.json"
        ));
        let lines: Vec<&str> = f.lines().collect();
        let dropped = [&lines[..2], &lines[3..]].concat().join("\n");
        assert!(matches!(
            read(dropped.as_bytes()),
            Err(PartsError::Length { .. } | PartsError::Garbled { .. })
        ));
        assert_eq!(read(b"just a log\n"), Err(PartsError::Empty));
        assert_eq!(read(&[0x1f, 0x8b, 8, 0]), Err(PartsError::Gzip));
    }

    fn file(b: &mut tar::Builder<Vec<u8>>, name: &str, body: &[u8]) {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, name, body).unwrap();
    }

    #[test]
    fn a_tar_archive_gives_its_json_files() {
        let long = format!("parts/{}-a-very-long-name.json", "worker".repeat(20));
        let mut b = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_size(0);
        b.append_data(&mut dir, "parts/", std::io::empty()).unwrap();
        file(&mut b, "parts/part-0.json", &json(1));
        file(&mut b, "parts/notes.txt", b"not a part");
        // Over 100 bytes: the builder writes a GNU long-name entry before it.
        file(&mut b, &long, &json(2));
        // A pax `path` record names the next entry, as `tar --format=pax` writes it.
        b.append_pax_extensions([("path", b"parts/pax-named.json".as_slice())])
            .unwrap();
        file(&mut b, "parts/short.json", &json(3));
        let t = b.into_inner().unwrap();
        let parts = read(&t).unwrap();
        let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["parts/part-0.json", long.as_str(), "parts/pax-named.json"]
        );
        assert_eq!(parts[1].contents, json(2));
        assert_eq!(parts[2].contents, json(3));
        let cut = &t[..512 * 2 + 10];
        assert!(
            matches!(read(cut), Err(PartsError::Tar(ref m)) if m.contains("ends inside")),
            "{:?}",
            read(cut)
        );
    }
}
