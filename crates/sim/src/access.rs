//! The access log: one JSON line per HTTP request, written by a thread of its own so that a
//! request only formats its line and hands it over.
//!
//! Each line holds the wall-clock arrival time (Unix seconds, microsecond resolution), which
//! makes the log a client-independent record of when requests really reached the server:
//! client benchmarks compare it with the schedule a load generator was asked to keep.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

/// Lines waiting for the writer at most; beyond this they are counted as lost rather than
/// making requests wait for the disk.
const BACKLOG: usize = 1 << 16;

/// One request, as logged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    pub(crate) arrival_unix_s: f64,
    pub(crate) replica: usize,
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) status: u16,
    /// Wall seconds from arrival until the response head was ready (a stream's body follows).
    pub(crate) ready_s: f64,
}

/// An open access log.
pub(crate) struct AccessLog {
    path: PathBuf,
    tx: Mutex<Option<SyncSender<String>>>,
    writer: Mutex<Option<JoinHandle<std::io::Result<u64>>>>,
    lost: AtomicU64,
}

impl AccessLog {
    /// Creates (truncates) the file and starts its writer.
    pub(crate) fn create(path: &Path) -> std::io::Result<AccessLog> {
        let file = File::create(path)?;
        let (tx, rx) = sync_channel(BACKLOG);
        let writer = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_lines(rx, BufWriter::new(file)))?;
        Ok(AccessLog {
            path: path.to_owned(),
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            lost: AtomicU64::new(0),
        })
    }

    /// Logs one request (never blocks).
    pub(crate) fn log(&self, e: &Entry<'_>) {
        let mut line = String::with_capacity(160);
        let _ = write!(
            line,
            "{{\"time\":{:.6},\"replica\":{},\"method\":",
            e.arrival_unix_s, e.replica
        );
        push_json_str(&mut line, e.method);
        line.push_str(",\"path\":");
        push_json_str(&mut line, e.path);
        let _ = writeln!(
            line,
            ",\"status\":{},\"ready_s\":{:.6}}}",
            e.status, e.ready_s
        );
        let sent = match self.tx.lock() {
            Ok(g) => match g.as_ref() {
                Some(tx) => match tx.try_send(line) {
                    Ok(()) => true,
                    Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
                },
                None => false,
            },
            Err(_) => false,
        };
        if !sent {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes what is pending, closes the file and says how it went: how many requests it
    /// holds, or why it may be incomplete.
    pub(crate) fn close(&self) -> Result<AccessLogSummary, AccessLogError> {
        if let Ok(mut g) = self.tx.lock() {
            g.take();
        }
        let handle = self.writer.lock().ok().and_then(|mut g| g.take());
        let lost = self.lost.load(Ordering::Relaxed);
        let path = self.path.clone();
        match handle.map(JoinHandle::join) {
            None => Ok(AccessLogSummary {
                path,
                requests: None,
            }),
            Some(Err(_)) => Err(AccessLogError::WriterFailed { path }),
            Some(Ok(Err(source))) => Err(AccessLogError::Write { path, source }),
            Some(Ok(Ok(written))) if lost > 0 => Err(AccessLogError::Lost {
                path,
                written,
                lost,
            }),
            Some(Ok(Ok(n))) => Ok(AccessLogSummary {
                path,
                requests: Some(n),
            }),
        }
    }
}

/// An access log, closed whole: where it is and how many requests it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogSummary {
    /// The file.
    pub path: PathBuf,
    /// Requests written (`None`: it had been closed before).
    pub requests: Option<u64>,
}

impl std::fmt::Display for AccessLogSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.requests {
            Some(n) => write!(f, "access log {}: {n} requests", self.path.display()),
            None => write!(f, "access log {} already closed", self.path.display()),
        }
    }
}

/// Why an access log may be incomplete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessLogError {
    /// It could not be created.
    #[error("cannot create the access log {}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The writer thread panicked.
    #[error("the access log's writer failed; {} may be incomplete", path.display())]
    WriterFailed {
        /// The file.
        path: PathBuf,
    },
    /// A write failed.
    #[error("cannot write the access log {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Lines were dropped because the disk did not keep up.
    #[error("access log {}: {written} requests written, {lost} lost (the disk did not keep up)", path.display())]
    Lost {
        /// The file.
        path: PathBuf,
        /// Lines written.
        written: u64,
        /// Lines dropped.
        lost: u64,
    },
}

/// The writer thread: flushes whenever it has caught up, so the file is current within a
/// moment (for `tail -f`) without a write per line under load.
fn write_lines(rx: Receiver<String>, mut out: BufWriter<File>) -> std::io::Result<u64> {
    let mut n = 0u64;
    while let Ok(line) = rx.recv() {
        out.write_all(line.as_bytes())?;
        n += 1;
        while let Ok(line) = rx.try_recv() {
            out.write_all(line.as_bytes())?;
            n += 1;
        }
        out.flush()?;
    }
    out.flush()?;
    Ok(n)
}

/// Appends `s` as a JSON string.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_json_and_all_arrive() {
        let path = std::env::temp_dir().join(format!("inferscale-access-{}", std::process::id()));
        let log = AccessLog::create(&path).unwrap();
        for i in 0..1000 {
            log.log(&Entry {
                arrival_unix_s: 1_764_480_000.0 + f64::from(i) * 1e-4,
                replica: 0,
                method: "POST",
                path: "/v1/comp\"letions\n",
                status: 200,
                ready_s: 0.000_12,
            });
        }
        let closed = log.close().unwrap();
        assert_eq!(closed.requests, Some(1000));
        assert_eq!(
            closed.to_string(),
            format!("access log {}: 1000 requests", path.display())
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1000);
        assert_eq!(lines[999]["path"], "/v1/comp\"letions\n");
        assert!((lines[999]["time"].as_f64().unwrap() - 1_764_480_000.099_9).abs() < 2e-6);
        assert_eq!(lines[3]["status"], 200);
    }
}
