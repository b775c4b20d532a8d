//! Drawing a [`Dashboard`] with ratatui: three views (everything, the replicas, the alerts)
//! over the same numbers. Pure: it writes into a buffer, so frames are snapshot-tested with
//! ratatui's `TestBackend` and `--once` prints the same buffer as text.

use std::time::Duration;

use inferscale_autoscale::alerts::State;
use inferscale_catalog::units::{format_duration, format_seconds};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Widget};

use crate::dashboard::{AlertRow, Dashboard, History, Percentiles, Replica, Trend};

/// Which view is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    /// The three tiers, the replicas and the alerts.
    #[default]
    Overview,
    /// Every replica, with why a target is down.
    Replicas,
    /// Every rule and each of its active instances.
    Alerts,
}

impl View {
    /// The next view (Tab).
    pub fn next(self) -> View {
        match self {
            View::Overview => View::Replicas,
            View::Replicas => View::Alerts,
            View::Alerts => View::Overview,
        }
    }
}

/// What the screen says besides the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Screen {
    /// The view.
    pub view: View,
    /// Refreshing is paused (the numbers are frozen).
    pub paused: bool,
}

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The last `width` values as block characters, scaled from 0 to their maximum; a missing
/// value is a space.
pub fn sparkline(values: impl Iterator<Item = Option<f64>>, width: usize) -> String {
    let v: Vec<Option<f64>> = values.collect();
    let v = &v[v.len().saturating_sub(width)..];
    let max = v.iter().flatten().fold(0.0_f64, |m, x| m.max(*x));
    v.iter()
        .map(|x| match x {
            None => ' ',
            Some(_) if max <= 0.0 => SPARK[0],
            Some(x) => {
                let i = ((x / max) * 7.0).round().clamp(0.0, 7.0) as usize;
                SPARK[i]
            }
        })
        .collect()
}

fn dash() -> String {
    "-".to_owned()
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(dash, |v| format!("{v:.digits$}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(dash, |v| format!("{:.1} %", v * 100.0))
}

fn lat(v: Option<f64>) -> String {
    v.map_or_else(dash, format_seconds)
}

fn ago(secs: f64) -> String {
    format_duration(Duration::from_secs(secs.max(0.0).round() as u64))
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

fn state_style(state: &str) -> Style {
    match state {
        "firing" | "DOWN" => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        "pending" => Style::default()
            .fg(Color::Yellow)
            .add_modifier(Modifier::BOLD),
        "up" => Style::default().fg(Color::Green),
        _ => dim(),
    }
}

/// The rows the overview needs for everything to show, at `width`.
pub fn height_needed(d: &Dashboard) -> u16 {
    let gpus = d.gpus.len().max(1) as u16;
    let replicas = d.replicas.len().max(1) as u16;
    let alerts = d.alerts.len().max(1) as u16;
    1 + 10 + (3 + gpus) + (3 + replicas) + (3 + alerts) + 1
}

/// Draws the dashboard into `buf` over `area`.
pub fn draw(area: Rect, buf: &mut Buffer, d: &Dashboard, h: &History, s: Screen) {
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    header(head, buf, d, s);
    match s.view {
        View::Overview => overview(body, buf, d, h),
        View::Replicas => replicas(body, buf, d, true),
        View::Alerts => alerts(body, buf, d, true),
    }
    let keys = format!(
        "[{}] q quit · p pause · tab or 1/2/3: overview, replicas, alerts",
        view_name(s.view)
    );
    let errors = if d.errors.is_empty() {
        String::new()
    } else {
        format!(" · {} queries failed: {}", d.errors.len(), d.errors[0])
    };
    Paragraph::new(Line::from(vec![
        Span::styled(keys, dim()),
        Span::styled(errors, Style::default().fg(Color::Red)),
    ]))
    .render(foot, buf);
}

fn view_name(v: View) -> &'static str {
    match v {
        View::Overview => "overview",
        View::Replicas => "replicas",
        View::Alerts => "alerts",
    }
}

fn header(area: Rect, buf: &mut Buffer, d: &Dashboard, s: Screen) {
    let up = d.replicas.iter().filter(|r| r.up == Some(true)).count();
    let firing = d.alerts.iter().filter(|a| a.state == "firing").count();
    let pending = d.alerts.iter().filter(|a| a.state == "pending").count();
    let mut spans = vec![
        Span::styled("inferscale monitor", bold()),
        Span::raw(format!(
            " · {} · {up}/{} replicas up · {} window · {} ",
            d.source,
            d.replicas.len(),
            d.window,
            clock(d.time)
        )),
    ];
    if firing > 0 {
        spans.push(Span::styled(
            format!("{firing} firing "),
            state_style("firing"),
        ));
    }
    if pending > 0 {
        spans.push(Span::styled(
            format!("{pending} pending "),
            state_style("pending"),
        ));
    }
    if s.paused {
        spans.push(Span::styled(
            "PAUSED",
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ));
    }
    Paragraph::new(Line::from(spans)).render(area, buf);
}

/// `HH:MM:SS` UTC of a time in seconds since the epoch.
fn clock(t: f64) -> String {
    let s = t.max(0.0) as u64 % 86_400;
    format!("{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

fn overview(area: Rect, buf: &mut Buffer, d: &Dashboard, h: &History) {
    let gpus = d.gpus.len().max(1) as u16 + 3;
    let reps = d.replicas.len().max(1) as u16 + 3;
    let [tiers, gpu, rep, al] = Layout::vertical([
        Constraint::Length(10),
        Constraint::Length(gpus),
        Constraint::Length(reps),
        Constraint::Min(3),
    ])
    .areas(area);
    let [t1, t2] =
        Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)]).areas(tiers);
    service(t1, buf, d, h);
    engine(t2, buf, d, h);
    gpus_table(gpu, buf, d);
    replicas(rep, buf, d, false);
    alerts(al, buf, d, false);
}

fn line(label: &str, value: String, spark: Option<String>) -> Line<'static> {
    let mut spans = vec![
        Span::styled(format!(" {label:<13}"), dim()),
        Span::styled(format!("{value:>10}"), bold()),
    ];
    if let Some(s) = spark {
        spans.push(Span::raw("  "));
        spans.push(Span::styled(s, Style::default().fg(Color::Cyan)));
    }
    Line::from(spans)
}

fn spark_width(area: Rect, used: u16) -> usize {
    usize::from(area.width.saturating_sub(used + 2))
}

fn service(area: Rect, buf: &mut Buffer, d: &Dashboard, h: &History) {
    let s = &d.service;
    let w = spark_width(area, 26);
    let sp = |t: Trend| Some(sparkline(h.of(t), w));
    let lat_row = |name: &str, p: &Percentiles, t: Trend| {
        Line::from(vec![
            Span::styled(format!(" {name:<13}"), dim()),
            Span::styled(
                format!("{:>9} {:>9} {:>9}", lat(p.p50), lat(p.p95), lat(p.p99)),
                bold(),
            ),
            Span::raw("  "),
            Span::styled(
                sparkline(h.of(t), spark_width(area, 46)),
                Style::default().fg(Color::Cyan),
            ),
        ])
    };
    let lines = vec![
        line("queue", num(s.queue, 0), sp(Trend::Queue)),
        line("running", num(s.running, 0), sp(Trend::Running)),
        line("req/s", num(s.rps, 2), sp(Trend::Rps)),
        line("errors (5xx)", pct(s.error_rate), sp(Trend::ErrorRate)),
        Line::from(Span::styled(
            format!(" {:<13}{:>9} {:>9} {:>9}", "", "p50", "p95", "p99"),
            dim(),
        )),
        lat_row("TTFT", &s.ttft, Trend::TtftP95),
        lat_row("TPOT", &s.tpot, Trend::TpotP95),
        lat_row("end to end", &s.e2e, Trend::E2eP95),
    ];
    Paragraph::new(lines)
        .block(Block::bordered().title(" Tier 1 · service "))
        .render(area, buf);
}

fn engine(area: Rect, buf: &mut Buffer, d: &Dashboard, h: &History) {
    let e = &d.engine;
    let w = spark_width(area, 26);
    let kv = match (e.kv_mean, e.kv_max) {
        (Some(m), Some(x)) if (x - m).abs() >= 0.0005 => {
            format!("{:.1} % (max {:.1} %)", m * 100.0, x * 100.0)
        }
        (m, _) => pct(m),
    };
    let lines = vec![
        Line::from(vec![
            Span::styled(format!(" {:<13}", "KV cache"), dim()),
            Span::styled(format!("{kv:>10}"), bold()),
        ]),
        line("", String::new(), Some(sparkline(h.of(Trend::Kv), w + 10))),
        line("preempt/s", num(e.preemptions_per_s, 2), None),
        line("prompt tok/s", num(e.prompt_tokens_per_s, 0), None),
        line(
            "gen tok/s",
            num(e.generation_tokens_per_s, 0),
            Some(sparkline(h.of(Trend::GenerationTokens), w)),
        ),
        line("tokens/step", num(e.tokens_per_step, 1), None),
    ];
    Paragraph::new(lines)
        .block(Block::bordered().title(" Tier 2 · engine "))
        .render(area, buf);
}

fn gpus_table(area: Rect, buf: &mut Buffer, d: &Dashboard) {
    let header = Row::new([
        "GPU",
        "util",
        "memcpy",
        "FB used / total",
        "power",
        "temp",
        "ECC sbe",
    ])
    .style(dim());
    let rows: Vec<Row> = if d.gpus.is_empty() {
        vec![Row::new([Cell::from(Span::styled(
            "no GPU metrics (give --dcgm-url, or the exporter is not scraped)",
            dim(),
        ))])]
    } else {
        d.gpus
            .iter()
            .map(|g| {
                let fb = match (g.fb_used_mib, g.fb_total_mib) {
                    (Some(u), Some(t)) => format!("{:.1} / {:.1} GiB", u / 1024.0, t / 1024.0),
                    (Some(u), None) => format!("{:.1} GiB / -", u / 1024.0),
                    _ => dash(),
                };
                Row::new([
                    g.name.clone(),
                    g.util_pct.map_or_else(dash, |v| format!("{v:.0} %")),
                    g.mem_copy_pct.map_or_else(dash, |v| format!("{v:.0} %")),
                    fb,
                    g.power_w.map_or_else(dash, |v| format!("{v:.0} W")),
                    g.temp_c.map_or_else(dash, |v| format!("{v:.0} °C")),
                    num(g.ecc_sbe, 0),
                ])
            })
            .collect()
    };
    Table::new(
        rows,
        [
            Constraint::Length(24),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(20),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Min(8),
        ],
    )
    .header(header)
    .block(Block::bordered().title(" Tier 3 · GPU (DCGM) "))
    .render(area, buf);
}

fn replica_state(r: &Replica, now: f64) -> (String, &'static str) {
    match r.up {
        Some(true) => ("up".into(), "up"),
        Some(false) => {
            let since = r
                .since
                .map_or(String::new(), |t| format!(" {}", ago(now - t)));
            (format!("DOWN{since}"), "DOWN")
        }
        None => ("?".into(), "?"),
    }
}

fn replicas(area: Rect, buf: &mut Buffer, d: &Dashboard, detail: bool) {
    let header = Row::new([
        "replica", "state", "queue", "running", "req/s", "KV", "p95 e2e", "",
    ])
    .style(dim());
    let rows: Vec<Row> = if d.replicas.is_empty() {
        vec![Row::new([Cell::from(Span::styled(
            "no replicas seen yet",
            dim(),
        ))])]
    } else {
        d.replicas
            .iter()
            .map(|r| {
                let (state, key) = replica_state(r, d.time);
                let why = match (&r.error, detail) {
                    (Some(e), _) if r.up == Some(false) => e.clone(),
                    _ => String::new(),
                };
                Row::new([
                    Cell::from(r.name.clone()),
                    Cell::from(Span::styled(state, state_style(key))),
                    Cell::from(num(r.queue, 0)),
                    Cell::from(num(r.running, 0)),
                    Cell::from(num(r.rps, 2)),
                    Cell::from(r.kv.map_or_else(dash, |v| format!("{:.0} %", v * 100.0))),
                    Cell::from(lat(r.e2e_p95)),
                    Cell::from(Span::styled(why, Style::default().fg(Color::Red))),
                ])
            })
            .collect()
    };
    Table::new(
        rows,
        [
            Constraint::Length(22),
            Constraint::Length(10),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Min(0),
        ],
    )
    .header(header)
    .block(Block::bordered().title(" Replicas "))
    .render(area, buf);
}

fn labels_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .filter(|(k, _)| k.as_str() != "severity")
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The labels that tell an instance apart, short: the pod (or GPU, or instance) when it has
/// one, else all of them.
fn short_labels(labels: &std::collections::BTreeMap<String, String>) -> String {
    for keys in [&["pod"][..], &["Hostname", "gpu"], &["instance"]] {
        let found: Vec<String> = keys
            .iter()
            .filter_map(|k| labels.get(*k).map(|v| format!("{k}={v}")))
            .collect();
        if !found.is_empty() {
            return found.join(",");
        }
    }
    labels_text(labels)
}

/// Every label, those that tell instances apart first.
fn all_labels(labels: &std::collections::BTreeMap<String, String>) -> String {
    let short = short_labels(labels);
    let rest: Vec<String> = labels
        .iter()
        .filter(|(k, _)| k.as_str() != "severity" && !short.contains(&format!("{k}=")))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if rest.is_empty() || short == labels_text(labels) {
        short
    } else {
        format!("{short},{}", rest.join(","))
    }
}

fn value_text(v: f64) -> String {
    inferscale_promql::format_value(round3(v))
}

/// What a rule's row says after its state: each instance's value and time to fire (or
/// time firing), the instances told apart by their pod.
fn alert_detail(a: &AlertRow, now: f64) -> String {
    if let Some(e) = &a.error {
        return format!("evaluation failed: {e}");
    }
    if a.instances.is_empty() {
        return format!("for {}", ago(a.for_s));
    }
    a.instances
        .iter()
        .map(|i| {
            let when = match i.state {
                State::Pending => {
                    format!("fires in {}", ago(i.fires_in_s.unwrap_or(0.0).ceil()))
                }
                State::Firing => format!(
                    "firing for {}",
                    ago(now - i.fired_at.unwrap_or(i.active_at))
                ),
            };
            let l = short_labels(&i.labels);
            let l = if l.is_empty() {
                String::new()
            } else {
                format!(" ({l})")
            };
            format!("{} {when}{l}", value_text(i.value))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn round3(v: f64) -> f64 {
    if v.is_finite() {
        (v * 1000.0).round() / 1000.0
    } else {
        v
    }
}

fn alerts(area: Rect, buf: &mut Buffer, d: &Dashboard, detail: bool) {
    let header = Row::new(["alert", "severity", "state", "detail"]).style(dim());
    let mut rows: Vec<Row> = Vec::new();
    if d.alerts.is_empty() {
        rows.push(Row::new([Cell::from(Span::styled(
            "no alert rules (give --rules prometheusrule.yaml)",
            dim(),
        ))]));
    }
    for a in &d.alerts {
        rows.push(Row::new([
            Cell::from(a.name.clone()),
            Cell::from(a.severity.clone().unwrap_or_else(dash)),
            Cell::from(Span::styled(a.state, state_style(a.state))),
            Cell::from(alert_detail(a, d.time)),
        ]));
        if detail {
            for i in &a.instances {
                rows.push(Row::new([
                    Cell::from(""),
                    Cell::from(""),
                    Cell::from(Span::styled(
                        i.state.to_string(),
                        state_style(&i.state.to_string()),
                    )),
                    Cell::from(format!(
                        "{} · active {}{} · {}",
                        value_text(i.value),
                        clock(i.active_at),
                        i.fired_at
                            .map_or(String::new(), |f| format!(", firing {}", clock(f))),
                        all_labels(&i.labels),
                    )),
                ]));
            }
        }
    }
    let firing = d.alerts.iter().filter(|a| a.state == "firing").count();
    Table::new(
        rows,
        [
            Constraint::Length(20),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Min(0),
        ],
    )
    .header(header)
    .block(Block::bordered().title(format!(
        " Alerts · {} rules, {firing} firing ",
        d.alerts.len()
    )))
    .render(area, buf);
}

/// The buffer's text, one line per row, trailing spaces trimmed.
pub fn text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut row = String::new();
        for x in area.left()..area.right() {
            row.push_str(buf[(x, y)].symbol());
        }
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_to_their_maximum_and_show_gaps() {
        let v = [Some(0.0), Some(1.0), None, Some(2.0)];
        assert_eq!(sparkline(v.into_iter(), 10), "▁▅ █");
        assert_eq!(sparkline(v.into_iter(), 2), " █");
        assert_eq!(sparkline([Some(0.0), Some(0.0)].into_iter(), 5), "▁▁");
    }

    #[test]
    fn the_clock_is_utc() {
        assert_eq!(clock(1_700_000_000.0), "22:13:20Z");
    }
}
