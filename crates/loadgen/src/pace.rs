//! Waiting for a request's send time, on the thread that sends it.
//!
//! The runtime's own timers tick in whole milliseconds, too coarse for arrivals tens of
//! microseconds apart, and a separate timing thread costs a cross-thread wake-up (a syscall
//! and two context switches) per request. So the sending thread waits itself:
//!
//! - a gap of at most [`SPIN`] is spun out, yielding to the runtime between looks at the clock
//!   (each yield also polls the sockets, so responses are read meanwhile): parking and waking
//!   again would cost more than the gap;
//! - a longer gap parks the thread on a `timerfd` armed for the send time (Linux; it has
//!   nanosecond resolution and no timer slack), so the runtime sleeps in its own poll and
//!   wakes at the send time or when a response arrives, whichever comes first.
//!
//! Elsewhere, or when a `timerfd` cannot be made, the runtime's timer carries the thread to
//! within [`COARSE`] of the send time and the rest is spun.
//!
//! Never early: [`Pacer::until`] returns at `due` or after it.

use inferscale_clock::Instant;
use std::time::Duration;

/// Gaps this short are spun rather than slept.
pub const SPIN: Duration = Duration::from_micros(50);

/// Without a `timerfd`: how far ahead of the send time the runtime's timer hands over to
/// spinning (its ticks are a millisecond, and it may fire up to one late).
pub const COARSE: Duration = Duration::from_millis(2);

/// Waits for send times on the current thread's runtime.
pub struct Pacer {
    #[cfg(target_os = "linux")]
    timer: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl Pacer {
    /// A pacer for the current runtime (call it inside one).
    pub fn new() -> Pacer {
        Pacer {
            #[cfg(target_os = "linux")]
            timer: linux::timer(),
        }
    }

    /// Whether the precise timer is in use (else the coarse timer and a longer spin).
    pub fn precise(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.timer.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Returns at `due` or soon after it, never before.
    pub async fn until(&mut self, due: Instant) {
        loop {
            let now = Instant::now();
            if now >= due {
                return;
            }
            let gap = due - now;
            if gap <= SPIN {
                tokio::task::yield_now().await;
                continue;
            }
            #[cfg(target_os = "linux")]
            if let Some(t) = &self.timer {
                linux::wait(t, gap).await;
                continue;
            }
            if gap > COARSE {
                tokio::time::sleep_until(due - COARSE).await;
            } else {
                tokio::task::yield_now().await;
            }
        }
    }
}

impl Default for Pacer {
    fn default() -> Pacer {
        Pacer::new()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::os::fd::OwnedFd;
    use std::time::Duration;

    use rustix::time::Timespec;
    use rustix::time::{
        Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, timerfd_create,
        timerfd_settime,
    };
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    /// A non-blocking monotonic `timerfd` registered with the runtime; `None` when either
    /// step fails (the pacer then falls back to the coarse timer).
    pub(super) fn timer() -> Option<AsyncFd<OwnedFd>> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .ok()?;
        // Deprecated because an `AsyncFd` over a borrowed descriptor can outlive it; this one
        // owns its `OwnedFd`, which is closed only when the `AsyncFd` (and its registration)
        // is dropped, so the registration never names a closed or reused descriptor. The
        // replacement is `unsafe`, which this workspace forbids.
        #[allow(deprecated)]
        AsyncFd::with_interest(fd, Interest::READABLE).ok()
    }

    fn spec(d: Duration) -> Timespec {
        Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        }
    }

    /// Arms the timer for `gap` from now and waits until it fires (or a stale readiness wakes
    /// the caller early: the caller looks at the clock again either way).
    pub(super) async fn wait(t: &AsyncFd<OwnedFd>, gap: Duration) {
        let armed = timerfd_settime(
            t.get_ref(),
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: spec(Duration::ZERO),
                it_value: spec(gap),
            },
        );
        if armed.is_err() {
            // Cannot happen for a valid descriptor; yield rather than spin without end.
            tokio::task::yield_now().await;
            return;
        }
        loop {
            let Ok(mut ready) = t.readable().await else {
                tokio::task::yield_now().await;
                return;
            };
            let mut expirations = [0u8; 8];
            match rustix::io::read(t.get_ref(), &mut expirations) {
                Ok(_) => return,
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(_) => {
                    tokio::task::yield_now().await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_pacer_is_never_early() {
        let mut p = Pacer::new();
        for gap_us in [0u64, 10, 40, 60, 200, 1500, 3000] {
            let due = Instant::now() + Duration::from_micros(gap_us);
            p.until(due).await;
            assert!(
                Instant::now() >= due,
                "returned before a due {gap_us} µs ahead"
            );
        }
        // A due in the past returns at once.
        p.until(Instant::now() - Duration::from_millis(5)).await;
    }

    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "current_thread")]
    async fn the_precise_timer_is_used_on_linux() {
        assert!(Pacer::new().precise());
    }
}
