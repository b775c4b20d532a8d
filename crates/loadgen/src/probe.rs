//! The stall probe: a thread that asks to wake every millisecond and does nothing else. A
//! wake-up more than a millisecond late is either a stall every thread of the process
//! suffered (the hypervisor pausing the VM, the host giving the CPU to someone else, a storm
//! of page faults), or a wait for a CPU that this machine's other threads held: the load
//! generator's own sending thread, when the two share a CPU and the sender is spinning. The
//! probe tells them apart by its own run-queue wait (Linux `/proc/thread-self/schedstat`):
//! the part of a late wake-up spent runnable but waiting for a CPU is a CPU wait, the rest a
//! machine stall. The driver reports both for each step beside its schedule lag, with the
//! CPU time the hypervisor stole (`steal` in /proc/stat), so a reader can tell a client
//! stall from a machine stall.

use inferscale_clock::Instant;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::report::Stalls;

/// How often the probe asks to wake.
const PERIOD: Duration = Duration::from_millis(1);
/// A wake-up later than this is a stall.
const LATE: Duration = Duration::from_millis(1);

/// A running probe.
pub struct Probe {
    t0: Instant,
    stop: Arc<AtomicBool>,
    /// Late wake-ups: (start, seconds late, seconds of it spent waiting for a CPU), start in
    /// seconds from `t0` (negative before it).
    stalls: Arc<Mutex<Vec<(f64, f64, f64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn since(t0: Instant, t: Instant) -> f64 {
    if t >= t0 {
        (t - t0).as_secs_f64()
    } else {
        -(t0 - t).as_secs_f64()
    }
}

impl Probe {
    /// Starts the probe; times are kept relative to `t0`. A probe that cannot start a thread
    /// records nothing.
    pub fn start(t0: Instant) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let stalls = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, stalls) = (Arc::clone(&stop), Arc::clone(&stalls));
            std::thread::Builder::new()
                .name("stall-probe".into())
                .spawn(move || {
                    let mut queue = RunQueue::open();
                    let mut waited = queue.waited();
                    while !stop.load(Ordering::Relaxed) {
                        let asked = Instant::now();
                        std::thread::sleep(PERIOD);
                        let late = asked.elapsed().saturating_sub(PERIOD);
                        let before = waited;
                        waited = queue.waited();
                        if late > LATE
                            && let Ok(mut s) = stalls.lock()
                        {
                            let queued = waited.saturating_sub(before).min(late);
                            s.push((
                                since(t0, asked + PERIOD),
                                late.as_secs_f64(),
                                queued.as_secs_f64(),
                            ));
                        }
                    }
                })
                .ok()
        };
        Probe {
            t0,
            stop,
            stalls,
            thread,
        }
    }

    /// The stalls that reached into the span from `a` to `b` (seconds from `t0`), with the
    /// steal measured over the same span when known. A stall that began before the span and
    /// ended in it counts whole: the requests due at the span's start went late by all of it.
    pub fn between(&self, a: f64, b: f64, steal_s: Option<f64>) -> Stalls {
        let mut out = Stalls {
            steal_s,
            ..Stalls::default()
        };
        if let Ok(s) = self.stalls.lock() {
            let reached = |&&(at, late, _): &&(f64, f64, f64)| at < b && at + late > a;
            for &(_, late, queued) in s.iter().filter(reached) {
                let stopped = late - queued;
                if stopped > LATE.as_secs_f64() {
                    out.count += 1;
                    out.total_s += stopped;
                    out.longest_s = out.longest_s.max(stopped);
                } else {
                    out.cpu_waits += 1;
                    out.cpu_wait_longest_s = out.cpu_wait_longest_s.max(queued);
                }
            }
        }
        out
    }

    /// Seconds from `t0` to now.
    pub fn now(&self) -> f64 {
        since(self.t0, Instant::now())
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The calling thread's run-queue wait so far: time it was runnable but not running
/// (the second field of Linux's per-thread `schedstat`). Zero throughout where the system
/// does not say, so that every late wake-up then counts as a machine stall.
struct RunQueue {
    file: Option<std::fs::File>,
    text: Vec<u8>,
}

impl RunQueue {
    /// Opens the calling thread's own `schedstat`.
    fn open() -> RunQueue {
        RunQueue {
            file: std::fs::File::open("/proc/thread-self/schedstat").ok(),
            text: Vec::with_capacity(64),
        }
    }

    /// The wait so far (one read of an open file: cheap enough for every wake-up).
    fn waited(&mut self) -> Duration {
        use std::io::{Read, Seek};
        let Some(f) = &mut self.file else {
            return Duration::ZERO;
        };
        self.text.clear();
        if f.rewind().is_err() || f.read_to_end(&mut self.text).is_err() {
            return Duration::ZERO;
        }
        schedstat_wait(&self.text).unwrap_or(Duration::ZERO)
    }
}

/// The run-queue wait in a `schedstat` line: "<run ns> <wait ns> <timeslices>".
fn schedstat_wait(text: &[u8]) -> Option<Duration> {
    let text = std::str::from_utf8(text).ok()?;
    let ns: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// CPU time the hypervisor has stolen from this machine so far, all CPUs together, seconds
/// (the `steal` column of /proc/stat's `cpu` line, in the kernel's 100 Hz user ticks).
/// `None` where there is no /proc/stat.
pub fn steal_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let steal: f64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spans select the stalls that reached into them. (A real stall, the whole process stopped
    /// and resumed, is tested on the binary: crates/cli/tests/load.rs.)
    #[test]
    fn stalls_are_counted_in_the_spans_they_reached() {
        let t0 = Instant::now();
        let p = Probe::start(t0);
        std::thread::sleep(Duration::from_millis(20));
        if let Ok(mut s) = p.stalls.lock() {
            s.push((0.5, 0.004, 0.0));
            s.push((1.5, 0.010, 0.0));
            // Late mostly for want of a CPU: a CPU wait, not a stall.
            s.push((1.6, 0.0045, 0.004));
            // Late partly for want of a CPU, and stopped for 2 ms more: a 2 ms stall.
            s.push((1.7, 0.0060, 0.004));
        }
        let all = p.between(0.0, 2.0, Some(0.25));
        assert!(all.count >= 3);
        assert!(all.longest_s >= 0.010);
        assert_eq!(all.steal_s, Some(0.25));
        assert!(all.cpu_waits >= 1 && all.cpu_wait_longest_s >= 0.004);
        let first = p.between(0.4, 1.0, None);
        assert!(first.count >= 1 && first.longest_s >= 0.004 && first.longest_s < 0.010);
        let late = p.between(1.55, 1.65, None);
        assert_eq!((late.count, late.cpu_waits), (0, 1));
        let partly = p.between(1.65, 1.75, None);
        assert_eq!(partly.count, 1);
        assert!((partly.longest_s - 0.002).abs() < 1e-9);
        // A stall that began just before a span and ended in it counts in the span; one
        // that ended before the span does not.
        if let Ok(mut s) = p.stalls.lock() {
            s.push((2.95, 0.100, 0.0));
        }
        let after = p.between(3.0, 4.0, None);
        assert_eq!(after.count, 1);
        assert!((after.longest_s - 0.100).abs() < 1e-9);
        assert_eq!(p.between(3.06, 4.0, None).count, 0);
        assert!(p.now() > 0.0);
        drop(p);
        assert!(steal_s().is_none_or(|s| s >= 0.0));
    }

    #[test]
    fn the_run_queue_wait_is_read_from_schedstat() {
        assert_eq!(
            schedstat_wait(b"123456 7890 42\n"),
            Some(Duration::from_nanos(7890))
        );
        assert_eq!(schedstat_wait(b"garbage"), None);
        // On Linux the probe's own file is there, and its wait never goes back.
        let mut q = RunQueue::open();
        let a = q.waited();
        std::thread::sleep(Duration::from_millis(2));
        assert!(q.waited() >= a);
    }
}
