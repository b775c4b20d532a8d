//! The stall probe: a thread that asks to wake every millisecond and does nothing else. A
//! wake-up more than a millisecond late is a stall every thread of the process suffered (the
//! hypervisor pausing the VM, the host giving the CPU to someone else, a storm of page
//! faults), not the load generator falling behind on its own work. The driver reports the
//! stalls of each step beside its schedule lag, with the CPU time the hypervisor stole
//! (`steal` in /proc/stat), so a reader can tell a client stall from a machine stall.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::report::Stalls;

/// How often the probe asks to wake.
const PERIOD: Duration = Duration::from_millis(1);
/// A wake-up later than this is a stall.
const LATE: Duration = Duration::from_millis(1);

/// A running probe.
pub struct Probe {
    t0: Instant,
    stop: Arc<AtomicBool>,
    /// (start, seconds late), start in seconds from `t0` (negative before it).
    stalls: Arc<Mutex<Vec<(f64, f64)>>>,
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
                    while !stop.load(Ordering::Relaxed) {
                        let asked = Instant::now();
                        std::thread::sleep(PERIOD);
                        let late = asked.elapsed().saturating_sub(PERIOD);
                        if late > LATE
                            && let Ok(mut s) = stalls.lock()
                        {
                            s.push((since(t0, asked + PERIOD), late.as_secs_f64()));
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

    /// The stalls that began between `a` and `b` (seconds from `t0`), with the steal
    /// measured over the same span when known.
    pub fn between(&self, a: f64, b: f64, steal_s: Option<f64>) -> Stalls {
        let mut out = Stalls {
            steal_s,
            ..Stalls::default()
        };
        if let Ok(s) = self.stalls.lock() {
            for &(_, late) in s.iter().filter(|(at, _)| *at >= a && *at < b) {
                out.count += 1;
                out.total_s += late;
                out.longest_s = out.longest_s.max(late);
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

    /// Spans select the stalls that began in them. (A real stall, the whole process stopped
    /// and resumed, is tested on the binary: crates/cli/tests/load.rs.)
    #[test]
    fn stalls_are_counted_in_the_span_they_began_in() {
        let t0 = Instant::now();
        let p = Probe::start(t0);
        std::thread::sleep(Duration::from_millis(20));
        if let Ok(mut s) = p.stalls.lock() {
            s.push((0.5, 0.004));
            s.push((1.5, 0.010));
        }
        let all = p.between(0.0, 2.0, Some(0.25));
        assert!(all.count >= 2);
        assert!(all.longest_s >= 0.010);
        assert_eq!(all.steal_s, Some(0.25));
        let first = p.between(0.4, 1.0, None);
        assert!(first.count >= 1 && first.longest_s >= 0.004 && first.longest_s < 0.010);
        assert!(p.now() > 0.0);
        drop(p);
        assert!(steal_s().is_none_or(|s| s >= 0.0));
    }
}
