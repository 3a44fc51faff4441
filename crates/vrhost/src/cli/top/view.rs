//! Drawing `vrhost top`: a header of host and port totals, the VR table,
//! the detail pane of the selected VR, a key line. Pure: it draws an
//! [`App`] on any ratatui backend (the tests use `TestBackend`).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};

use super::app::{App, SortKey};
use super::rates::{DropView, VrView};
use crate::cli::output::{self, Col, duration, list, pct, rate};

/// A rate, or `-` before there are two snapshots.
/// Draw the whole screen.
pub fn render(app: &App, f: &mut Frame) {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(header_lines(app)), header);
    match app.selected_row().filter(|_| app.detail) {
        Some(vr) => {
            let detail = detail_lines(vr);
            // The detail gets what it needs, the table at least 5 lines.
            let want = detail.len() as u16 + 2;
            let [table, pane] =
                Layout::vertical([Constraint::Min(5), Constraint::Length(want)]).areas(body);
            render_table(app, f, table);
            f.render_widget(
                Paragraph::new(detail).block(
                    Block::default()
                        .borders(Borders::TOP)
                        .title(format!(" {} ", vr.name))
                        .title_style(Style::new().add_modifier(Modifier::BOLD)),
                ),
                pane,
            );
        }
        None => render_table(app, f, body),
    }
    f.render_widget(Paragraph::new(footer_line(app)), footer);
}

fn header_lines(app: &App) -> Vec<Line<'static>> {
    let h = &app.host;
    let ingress = h
        .ingress_drops
        .iter()
        .filter(|d| d.per_s.is_some_and(|r| r > 0.0))
        .map(|d| format!("{} {}", d.reason, rate(d.per_s)))
        .collect::<Vec<_>>();
    vec![
        labelled(
            "vrhost top",
            format!(
                "  {}  up {}  generation {}  VRs {}/{} running  every {:.1} s",
                app.api,
                duration(h.uptime_s),
                h.generation,
                h.vrs_running,
                h.vrs,
                app.interval.as_secs_f64(),
            ),
        ),
        labelled(
            "host  ",
            format!(
                "rx {} pps  ingress drops {}/s{}  worker CPU {}%  VR restarts {}  slot violations {}",
                rate(h.rx_pps),
                rate(h.ingress_drops_ps),
                if ingress.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", ingress.join(", "))
                },
                pct(h.worker_cpu_pct),
                h.vr_restarts,
                h.slot_violations,
            ),
        ),
        labelled(
            "ports ",
            format!(
                "rx {} pps {} bit/s  tx {} pps {} bit/s  drops {}/s",
                rate(h.ports_rx_pps),
                rate(h.ports_rx_bps),
                rate(h.ports_tx_pps),
                rate(h.ports_tx_bps),
                rate(h.ports_drops_ps),
            ),
        ),
    ]
}

/// The VR table's columns: header, width (0: as wide as the names, or the
/// rest of the line), right-aligned.
pub const COLUMNS: [(&str, u16, bool); 12] = [
    ("NAME", 0, false),
    ("STATE", 7, false),
    ("RX-PPS", 7, true),
    ("TX-PPS", 7, true),
    ("RX-BIT/S", 8, true),
    ("TX-BIT/S", 8, true),
    ("DROP/S", 7, true),
    ("CPU%", 6, true),
    ("RING", 5, true),
    ("POOL%", 5, true),
    ("CORES", 5, false),
    ("PIDS", 0, false),
];

/// A VR's cells under [`COLUMNS`].
pub fn cells(v: &VrView) -> [String; 12] {
    [
        v.name.clone(),
        v.state.clone(),
        rate(v.rx_pps),
        rate(v.tx_pps),
        rate(v.rx_bps),
        rate(v.tx_bps),
        rate(v.drops_ps),
        pct(v.cpu_pct),
        v.ring_fill.to_string(),
        pct(v.pool_used_pct),
        list(&v.cores),
        list(&v.pids),
    ]
}

fn render_table(app: &App, f: &mut Frame, area: Rect) {
    let name_w = app
        .rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 32) as u16;
    let widths: Vec<Constraint> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (_, w, _))| match i {
            0 => Constraint::Length(name_w),
            _ if i == COLUMNS.len() - 1 => Constraint::Min(4),
            _ => Constraint::Length(*w),
        })
        .collect();
    let sorted = app.sort.column();
    let header = Row::new(COLUMNS.iter().map(|(name, _, right)| {
        let mut style = Style::new().add_modifier(Modifier::BOLD);
        if *name == sorted {
            style = style.fg(Color::Cyan).add_modifier(Modifier::UNDERLINED);
        }
        let line = Line::from(*name).style(style);
        Cell::new(if *right { line.right_aligned() } else { line })
    }));
    let rows = app.rows.iter().map(|v| {
        let style = if v.state == "running" {
            Style::new()
        } else {
            Style::new().fg(Color::DarkGray)
        };
        Row::new(cells(v).into_iter().zip(COLUMNS).map(|(c, (_, _, right))| {
            let line = Line::from(c);
            Cell::new(if right { line.right_aligned() } else { line })
        }))
        .style(style)
    });
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(2)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(app.selected_index());
    f.render_stateful_widget(table, area, &mut state);
    if app.rows.is_empty() && app.has_data() {
        let msg = Rect {
            y: area
                .y
                .saturating_add(2)
                .min(area.bottom().saturating_sub(1)),
            height: 1,
            ..area
        };
        f.render_widget(Paragraph::new("  no VRs"), msg);
    }
}

fn drop_text(d: &DropView) -> String {
    format!(
        "{} {} {}/s ({} in all)",
        d.stage,
        d.reason,
        rate(d.per_s),
        d.total
    )
}

/// The detail pane of one VR, as lines of text (aligned with the same
/// tables as the one-shot commands).
pub fn detail_lines(v: &VrView) -> Vec<Line<'static>> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut lines = Vec::new();
    let vnics = output::Table::of(
        &v.vnics,
        &[
            (Col::r("VNIC"), &|n| n.index.to_string()),
            (Col::l("PORT"), &|n| n.port.clone()),
            (Col::r("RX-PPS"), &|n| rate(n.rx_pps)),
            (Col::r("TX-PPS"), &|n| rate(n.tx_pps)),
            (Col::r("RX-BIT/S"), &|n| rate(n.rx_bps)),
            (Col::r("TX-BIT/S"), &|n| rate(n.tx_bps)),
        ],
    );
    push_table(&mut lines, &vnics, bold);

    let drops: Vec<String> = v
        .drops
        .iter()
        .filter(|d| d.total > 0)
        .map(drop_text)
        .collect();
    lines.push(labelled(
        "drops  ",
        if drops.is_empty() {
            "none".to_owned()
        } else {
            drops.join(" | ")
        },
    ));
    let viol = output::map_list(&v.violations);
    lines.push(Line::from(vec![
        Span::styled("violations  ", bold),
        if viol == "-" {
            Span::raw("none")
        } else {
            Span::styled(viol, Style::new().fg(Color::Red))
        },
        Span::raw(format!("   exits {}", v.exits)),
    ]));

    let instances = output::Table::of(
        &v.instances,
        &[
            (Col::r("INST"), &|i| i.index.to_string()),
            (Col::r("PID"), &|i| output::opt(i.pid)),
            (Col::r("CORE"), &|i| output::opt(i.core)),
            (Col::l("STATE"), &|i| {
                if i.running { "running" } else { "stopped" }.to_owned()
            }),
            (Col::r("CPU%"), &|i| pct(i.cpu_pct)),
            (Col::r("SLEEPS/S"), &|i| rate(i.sleeps_ps)),
            (Col::r("HEARTBEAT"), &|i| i.heartbeat.to_string()),
            (Col::r("RX-FILL"), &|i| i.rx_fill.to_string()),
            (Col::r("TX-FILL"), &|i| i.tx_fill.to_string()),
        ],
    );
    push_table(&mut lines, &instances, bold);
    lines
}

/// A line of a bold label, then plain text.
fn labelled(label: &'static str, text: String) -> Line<'static> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    Line::from(vec![Span::styled(label, bold), Span::raw(text)])
}

fn push_table(lines: &mut Vec<Line<'static>>, t: &output::Table, header: Style) {
    for (i, l) in t.render().lines().enumerate() {
        lines.push(if i == 0 {
            Line::styled(l.to_owned(), header)
        } else {
            Line::raw(l.to_owned())
        });
    }
}

fn footer_line(app: &App) -> Line<'static> {
    let keys = format!(
        "q quit  ↑↓/jk select  enter/d detail  s/1-5 sort ({})",
        SortKey::ALL
            .iter()
            .enumerate()
            .map(|(i, k)| format!("{}={}", i + 1, k.column()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    match &app.error {
        Some(e) => Line::from(vec![
            Span::styled(format!("error: {e}"), Style::new().fg(Color::Red)),
            Span::raw(format!("  (retrying)  {keys}")),
        ]),
        None => Line::raw(keys).style(Style::new().fg(Color::DarkGray)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};

    use super::*;
    use crate::cli::top::app::tests::app;
    use crate::cli::top::rates::tests::fixture;

    fn screen(app: &App, w: u16, h: u16) -> Vec<String> {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        term.draw(|f| render(app, f)).unwrap();
        let buf = term.backend().buffer().clone();
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buf[(x, y)].symbol().to_owned())
                    .collect::<String>()
                    .trim_end()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn table_screen_from_fixture() {
        let s = screen(&app(), 120, 12);
        assert_eq!(
            s[0],
            "vrhost top  /run/vrhost/api.sock  up 01:02:06  generation 3  VRs 1/2 running  every 1.0 s"
        );
        assert_eq!(
            s[1],
            "host  rx 100k pps  ingress drops 20/s (pool_full 20)  worker CPU 50.0%  VR restarts 1  slot violations 0"
        );
        assert_eq!(
            s[2],
            "ports rx 100k pps 51.2M bit/s  tx 100k pps 51.2M bit/s  drops 0/s"
        );
        assert_eq!(
            s[3],
            "NAME      STATE     RX-PPS   TX-PPS  RX-BIT/S  TX-BIT/S   DROP/S    CPU%   RING  POOL%  CORES  PIDS"
        );
        assert_eq!(
            s[4],
            "tenant-a  running     100k    99.0k     51.2M     50.7M       30    25.0     15   25.0  1      4242"
        );
        assert_eq!(
            s[5],
            "tenant-b  stopped        0        0         0         0        0     0.0      0    0.0  -      -"
        );
        assert!(s[11].starts_with("q quit"), "{:?}", s[11]);
    }

    #[test]
    fn detail_pane_of_the_selected_vr() {
        let mut a = app();
        a.on_key(KeyCode::Enter, KeyModifiers::NONE);
        let s = screen(&a, 120, 24).join("\n");
        for want in [
            "tenant-a",
            "VNIC  PORT  RX-PPS  TX-PPS  RX-BIT/S  TX-BIT/S",
            "   0  p0     60.0k       0     30.7M         0",
            "   1  p1     40.0k       0     20.5M         0",
            "drops  host pool_full 20/s (25 in all) | vr no_route 10/s (17 in all) | port tx 0/s (1 in all)",
            "violations  slot_state=2   exits 0",
            "INST   PID  CORE  STATE    CPU%  SLEEPS/S  HEARTBEAT  RX-FILL  TX-FILL",
            "   0  4242     1  running  25.0         4     123456       12        3",
        ] {
            assert!(s.contains(want), "{want:?} missing in\n{s}");
        }
    }

    #[test]
    fn first_frame_and_errors() {
        let mut a = App::new(Duration::from_secs(2), "http://127.0.0.1:9".into());
        a.update(fixture(), Instant::now());
        a.set_error("the daemon is not running".into());
        let s = screen(&a, 120, 10);
        assert_eq!(
            s[4],
            "tenant-a  running        -        -         -         -        -       -     15   25.0  1      4242"
        );
        assert!(
            s[9].starts_with("error: the daemon is not running  (retrying)"),
            "{:?}",
            s[9]
        );
        // Small terminals draw without panicking.
        screen(&a, 20, 4);
        screen(&a, 1, 1);
    }
}
