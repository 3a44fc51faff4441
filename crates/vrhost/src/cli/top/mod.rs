//! `vrhost top`: a live view of every VR's rates over the API (ratatui on
//! crossterm). It polls `GET /v1/stats` every `--interval` and shows rates
//! from consecutive snapshots.
//!
//! The parts: [`rates`] turns two snapshots into rates, [`app`] holds the
//! view's state and handles keys, [`view`] draws it; this module only runs
//! the terminal loop (poll, keys, draw). `--once` prints one round of rates
//! without a terminal, for scripts.

pub mod app;
pub mod rates;
pub mod view;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{self, Event, KeyEventKind};

use app::{Action, App};
use rates::{Sample, compute};

use super::ApiArgs;
use super::api::Stats;
use super::client::Client;
use super::output::{Col, Table, pct, rate};

/// `vrhost top`.
#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    /// Seconds between refreshes.
    #[arg(long, short = 'i', default_value_t = 1.0, value_parser = parse_interval)]
    pub interval: f64,
    /// Print one round of rates (two snapshots `--interval` apart) and exit;
    /// no terminal needed.
    #[arg(long)]
    pub once: bool,
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.1..=3600.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?}: seconds, 0.1 to 3600")),
    }
}

fn fetch(c: &Client) -> Result<Stats> {
    Ok(c.get_as("/v1/stats")?)
}

/// Run `vrhost top`.
///
/// # Errors
/// The daemon cannot be reached at the start, or the terminal fails.
pub fn run(args: &TopArgs) -> Result<()> {
    let interval = Duration::from_secs_f64(args.interval);
    // A poll may take up to the interval (at least 2 s) before it counts as
    // failed; the view then shows the error and keeps the last numbers.
    let client = args
        .api
        .client()?
        .with_timeout(interval.max(Duration::from_secs(2)));
    // Fail before taking over the terminal if the daemon is not there.
    let first = fetch(&client)?;
    let first_at = Instant::now();
    if args.once {
        return once(
            args,
            &client,
            Sample {
                stats: first,
                at: first_at,
            },
            interval,
        );
    }
    if !std::io::stdout().is_terminal() {
        bail!("vrhost top needs a terminal (use `vrhost top --once` or `vrhost stats`)");
    }
    let mut app = App::new(interval, client.endpoint().describe());
    app.update(first, first_at);
    let mut terminal = ratatui::try_init().context("starting the terminal view")?;
    let result = event_loop(&mut terminal, &client, &mut app);
    ratatui::restore();
    result
}

fn event_loop(terminal: &mut DefaultTerminal, client: &Client, app: &mut App) -> Result<()> {
    let mut next = Instant::now() + app.interval;
    loop {
        terminal.draw(|f| view::render(app, f))?;
        let wait = next.saturating_duration_since(Instant::now());
        // A key is handled; a resize or anything else only redraws.
        if event::poll(wait)?
            && let Event::Key(k) = event::read()?
            && k.kind == KeyEventKind::Press
            && app.on_key(k.code, k.modifiers) == Action::Quit
        {
            return Ok(());
        }
        if Instant::now() >= next {
            match fetch(client) {
                Ok(s) => app.update(s, Instant::now()),
                Err(e) => app.set_error(format!("{e:#}")),
            }
            next = Instant::now() + app.interval;
        }
    }
}

/// `--once`: rates over one interval, as a table or JSON.
fn once(args: &TopArgs, client: &Client, first: Sample, interval: Duration) -> Result<()> {
    std::thread::sleep(interval);
    let second = Sample {
        stats: fetch(client)?,
        at: Instant::now(),
    };
    let (host, vrs) = compute(Some(&first), &second);
    if args.api.json() {
        #[derive(serde::Serialize)]
        struct Once<'a> {
            host: &'a rates::HostView,
            vrs: &'a [rates::VrView],
        }
        let once = Once {
            host: &host,
            vrs: &vrs,
        };
        super::output::out(&(serde_json::to_string_pretty(&once)? + "\n"))?;
        return Ok(());
    }
    println!(
        "host: rx {} pps, ingress drops {}/s, worker CPU {}%; ports: rx {} pps {} bit/s, tx {} pps {} bit/s, drops {}/s",
        rate(host.rx_pps),
        rate(host.ingress_drops_ps),
        pct(host.worker_cpu_pct),
        rate(host.ports_rx_pps),
        rate(host.ports_rx_bps),
        rate(host.ports_tx_pps),
        rate(host.ports_tx_bps),
        rate(host.ports_drops_ps),
    );
    let cols: Vec<Col> = view::COLUMNS
        .iter()
        .map(|(name, _, right)| if *right { Col::r(name) } else { Col::l(name) })
        .collect();
    let mut t = Table::new(&cols);
    for v in &vrs {
        t.row(view::cells(v));
    }
    t.print()?;
    Ok(())
}
