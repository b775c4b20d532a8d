//! The three ways to run the monitor: live in the terminal (keys to quit, pause and switch
//! views), `--once` (read for a while, print one frame as text) and `--json` (one
//! dashboard per refresh as a JSON line, for scripts).

use std::future::Future;
use std::io::Write;
use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::Monitor;
use crate::dashboard::{Dashboard, History};
use crate::ui::{self, Screen, View};

/// Seconds since the epoch, now.
pub fn now() -> f64 {
    inferscale_clock::unix_seconds()
}

/// The dashboard drawn at `width` columns (as many rows as it needs), as text.
pub fn render_text(d: &Dashboard, h: &History, screen: Screen, width: u16) -> String {
    let height = match screen.view {
        View::Overview => ui::height_needed(d),
        View::Replicas => 4 + d.replicas.len().max(1) as u16 + 2,
        View::Alerts => {
            4 + d
                .alerts
                .iter()
                .map(|a| 1 + a.instances.len() as u16)
                .sum::<u16>()
                .max(1)
                + 2
        }
    };
    let mut term = match Terminal::new(TestBackend::new(width.max(40), height)) {
        Ok(t) => t,
        Err(e) => match e {},
    };
    let drawn = term.draw(|f| ui::draw(f.area(), f.buffer_mut(), d, h, screen));
    if let Err(e) = drawn {
        match e {}
    }
    ui::text(term.backend().buffer())
}

/// `--once`: reads every `refresh` for `collect` (so that rates and percentiles have a
/// window and the rules have been evaluated), then returns the last dashboard. A
/// Prometheus has the window already: one read, after restoring the rules' states.
pub async fn once(m: &mut Monitor, collect: Duration, refresh: Duration) -> Dashboard {
    if m.reads_prometheus() {
        m.restore(now(), refresh.as_secs_f64()).await;
        return m.refresh(now()).await;
    }
    let started = inferscale_clock::now();
    let mut tick = tokio::time::interval(refresh);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let d = m.refresh(now()).await;
        if started.elapsed() + refresh > collect {
            return d;
        }
    }
}

/// Ready to refresh every `refresh`: a Prometheus' rules replayed first; the ticker (a late
/// refresh is skipped, not caught up).
async fn start(m: &mut Monitor, refresh: Duration) -> tokio::time::Interval {
    if m.reads_prometheus() {
        m.restore(now(), refresh.as_secs_f64()).await;
    }
    let mut tick = tokio::time::interval(refresh);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    tick
}

/// `--json`: a dashboard per refresh, one JSON object per line on `out`, until `duration`
/// has passed or `stop` completes.
///
/// # Errors
///
/// When `out` cannot be written (a closed pipe ends the loop quietly: `Ok`).
pub async fn json_lines(
    m: &mut Monitor,
    refresh: Duration,
    duration: Option<Duration>,
    stop: impl Future<Output = ()>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut tick = start(m, refresh).await;
    let started = inferscale_clock::now();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = tick.tick() => {}
        }
        let d = m.refresh(now()).await;
        let line = serde_json::to_string(&d).map_err(std::io::Error::other)?;
        match writeln!(out, "{line}").and_then(|()| out.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
        if duration.is_some_and(|d| started.elapsed() + refresh > d) {
            return Ok(());
        }
    }
}

/// What a key does.
fn key(screen: &mut Screen, code: KeyCode, mods: KeyModifiers) -> bool {
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return false,
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return false,
        KeyCode::Char('p') | KeyCode::Char(' ') => screen.paused = !screen.paused,
        KeyCode::Tab => screen.view = screen.view.next(),
        KeyCode::Char('1') => screen.view = View::Overview,
        KeyCode::Char('2') => screen.view = View::Replicas,
        KeyCode::Char('3') => screen.view = View::Alerts,
        _ => {}
    }
    true
}

/// The live dashboard on the terminal, refreshed every `refresh`, until `q`, Esc, Ctrl-C or
/// `stop`. The terminal is restored however it ends.
///
/// # Errors
///
/// When the terminal cannot be set up or drawn on.
pub async fn live(
    m: &mut Monitor,
    refresh: Duration,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut terminal = ratatui::try_init()?;
    let r = live_on(&mut terminal, m, refresh, stop).await;
    ratatui::try_restore()?;
    r
}

async fn live_on(
    terminal: &mut ratatui::DefaultTerminal,
    m: &mut Monitor,
    refresh: Duration,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Keys are read on a thread of their own (crossterm's read blocks); it ends with the
    // process.
    let (tx, mut keys) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(ev) = event::read() {
            if tx.send(ev).is_err() {
                break;
            }
        }
    });
    let mut screen = Screen::default();
    let mut shown = Dashboard {
        source: m.describe(),
        ..Dashboard::default()
    };
    let draw = |t: &mut ratatui::DefaultTerminal, d: &Dashboard, h: &History, s: Screen| {
        t.draw(|f| ui::draw(f.area(), f.buffer_mut(), d, h, s))
            .map(|_| ())
    };
    draw(terminal, &shown, m.history(), screen)?;
    let mut tick = start(m, refresh).await;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = tick.tick() => {
                if !screen.paused {
                    shown = m.refresh(now()).await;
                }
            }
            ev = keys.recv() => match ev {
                Some(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    if !key(&mut screen, k.code, k.modifiers) {
                        return Ok(());
                    }
                }
                Some(_) => {}
                None => return Ok(()),
            },
        }
        draw(terminal, &shown, m.history(), screen)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_quit_pause_and_switch_views() {
        let mut s = Screen::default();
        assert!(key(&mut s, KeyCode::Char('p'), KeyModifiers::NONE));
        assert!(s.paused);
        assert!(key(&mut s, KeyCode::Tab, KeyModifiers::NONE));
        assert_eq!(s.view, View::Replicas);
        assert!(key(&mut s, KeyCode::Char('3'), KeyModifiers::NONE));
        assert_eq!(s.view, View::Alerts);
        assert!(!key(&mut s, KeyCode::Char('q'), KeyModifiers::NONE));
        assert!(!key(&mut s, KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(key(&mut s, KeyCode::Char('c'), KeyModifiers::NONE));
    }
}
