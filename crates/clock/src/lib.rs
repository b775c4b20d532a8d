//! The process's clocks, read in one place: the clock seam.
//!
//! **Monotonic time** is tokio's [`Instant`]. Inside a runtime whose clock is paused
//! (`#[tokio::test(start_paused = true)]` or `tokio::time::pause`, which need tokio's
//! `test-util` feature, enabled only by test builds) it is virtual: it stands still while any
//! task has work to do and jumps to the next timer when every task waits, so a test of a
//! 30-second cache or a 5-second push loop takes milliseconds, as mini-redis's tests do. Outside
//! a runtime (a thread of its own) and in every build without `test-util`, [`Instant::now`] is
//! the machine's monotonic clock, at no cost over `std::time::Instant`.
//!
//! **Calendar time** ([`wall`], [`unix_seconds`]) is the machine's, unpaused: it stamps reports
//! and the OpenAI `created` fields, and nothing measures a duration with it.
//!
//! The architecture test (`crates/testkit/tests/architecture.rs`) holds every other library to
//! this seam: no `std::time::Instant` and no `inferscale_clock::wall()` outside this crate.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use tokio::time::Instant;

/// Now, on the monotonic clock (virtual when the current runtime's clock is paused).
pub fn now() -> Instant {
    Instant::now()
}

/// Now, on the calendar.
pub fn wall() -> SystemTime {
    SystemTime::now()
}

/// Now, as seconds since the Unix epoch (0 on a machine whose calendar is set before 1970).
pub fn unix_seconds() -> f64 {
    unix(wall()).as_secs_f64()
}

/// `t` as a duration since the Unix epoch; zero before it.
pub fn unix(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_paused_clock_moves_only_by_the_timers() {
        let t0 = now();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let waited = t0.elapsed().as_secs_f64();
        // Virtual: exactly the hour, however long the machine took.
        assert_eq!(waited, 3600.0);
    }

    #[test]
    fn outside_a_runtime_it_is_the_machines_clock() {
        let t0 = now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(t0.elapsed() >= Duration::from_millis(5));
        assert!(
            unix_seconds() > 1.6e9,
            "the calendar reads {}",
            unix_seconds()
        );
    }
}
