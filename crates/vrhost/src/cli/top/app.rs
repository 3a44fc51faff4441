//! The state of `vrhost top`: the last two snapshots and their rates, the
//! sort order, the selected VR, the detail pane; and what each key does.
//! No terminal here: the loop in `mod.rs` feeds it snapshots and keys.

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{KeyCode, KeyModifiers};

use super::rates::{HostView, Sample, VrView, compute};
use crate::cli::api::Stats;

/// The column the VR table is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Name, A to Z.
    Name,
    /// Received frames per second, highest first.
    #[default]
    RxPps,
    /// Sent frames per second, highest first.
    TxPps,
    /// Drops per second, highest first.
    Drops,
    /// CPU, highest first.
    Cpu,
}

impl SortKey {
    /// In the order `s` cycles through and keys `1`..`5` pick.
    pub const ALL: [SortKey; 5] = [
        SortKey::Name,
        SortKey::RxPps,
        SortKey::TxPps,
        SortKey::Drops,
        SortKey::Cpu,
    ];

    /// The next one.
    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|k| *k == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    /// The column header it sorts.
    pub fn column(self) -> &'static str {
        match self {
            SortKey::Name => "NAME",
            SortKey::RxPps => "RX-PPS",
            SortKey::TxPps => "TX-PPS",
            SortKey::Drops => "DROP/S",
            SortKey::Cpu => "CPU%",
        }
    }

    fn value(self, v: &VrView) -> Option<f64> {
        match self {
            SortKey::Name => None,
            SortKey::RxPps => v.rx_pps,
            SortKey::TxPps => v.tx_pps,
            SortKey::Drops => v.drops_ps,
            SortKey::Cpu => v.cpu_pct,
        }
    }
}

/// What the caller should do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Keep going (redraw).
    Continue,
    /// Leave `top`.
    Quit,
}

/// The live view's state.
#[derive(Debug, Clone)]
pub struct App {
    prev: Option<Sample>,
    cur: Option<Sample>,
    /// Host and port totals.
    pub host: HostView,
    /// The VRs, sorted.
    pub rows: Vec<VrView>,
    /// The selected VR, by name (so it stays selected as rows move).
    pub selected: Option<String>,
    /// The sort column.
    pub sort: SortKey,
    /// Whether the detail pane of the selected VR is open.
    pub detail: bool,
    /// The last failed poll, shown until the next good one.
    pub error: Option<String>,
    /// The refresh interval.
    pub interval: Duration,
    /// Where the API is (for the title).
    pub api: String,
}

impl App {
    /// An empty view.
    pub fn new(interval: Duration, api: String) -> Self {
        App {
            prev: None,
            cur: None,
            host: HostView::default(),
            rows: Vec::new(),
            selected: None,
            sort: SortKey::default(),
            detail: false,
            error: None,
            interval,
            api,
        }
    }

    /// Take a new snapshot: rates against the previous one, re-sorted, the
    /// selection kept (or moved to the first VR if it is gone).
    pub fn update(&mut self, stats: Stats, at: Instant) {
        let s = Sample { stats, at };
        let (host, rows) = compute(self.cur.as_ref(), &s);
        self.prev = self.cur.replace(s);
        self.host = host;
        self.rows = rows;
        self.error = None;
        self.sort_rows();
        if !self
            .selected
            .as_ref()
            .is_some_and(|n| self.rows.iter().any(|r| &r.name == n))
        {
            self.selected = self.rows.first().map(|r| r.name.clone());
        }
    }

    /// A poll failed: keep the last numbers, show why.
    pub fn set_error(&mut self, e: String) {
        self.error = Some(e);
    }

    /// Whether a snapshot was taken yet.
    pub fn has_data(&self) -> bool {
        self.cur.is_some()
    }

    fn sort_rows(&mut self) {
        let key = self.sort;
        self.rows.sort_by(|a, b| {
            let by_value = match (key.value(a), key.value(b)) {
                (Some(x), Some(y)) => y.total_cmp(&x),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            };
            by_value.then_with(|| a.name.cmp(&b.name))
        });
    }

    /// The row of the selected VR.
    pub fn selected_index(&self) -> Option<usize> {
        let n = self.selected.as_ref()?;
        self.rows.iter().position(|r| &r.name == n)
    }

    /// The selected VR.
    pub fn selected_row(&self) -> Option<&VrView> {
        self.selected_index().map(|i| &self.rows[i])
    }

    fn select(&mut self, i: usize) {
        if let Some(r) = self.rows.get(i) {
            self.selected = Some(r.name.clone());
        }
    }

    fn set_sort(&mut self, k: SortKey) {
        self.sort = k;
        self.sort_rows();
    }

    /// Handle a key: arrows or j/k move, Home/End (g/G) jump, Enter or d
    /// toggles the detail pane, s cycles the sort column and 1-5 pick it,
    /// Esc closes the detail pane (or quits), q and Ctrl-C quit.
    pub fn on_key(&mut self, code: KeyCode, mods: KeyModifiers) -> Action {
        let last = self.rows.len().saturating_sub(1);
        let cur = self.selected_index().unwrap_or(0);
        match code {
            KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return Action::Quit,
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Esc if self.detail => self.detail = false,
            KeyCode::Esc => return Action::Quit,
            KeyCode::Down | KeyCode::Char('j') => self.select((cur + 1).min(last)),
            KeyCode::Up | KeyCode::Char('k') => self.select(cur.saturating_sub(1)),
            KeyCode::PageDown => self.select((cur + 10).min(last)),
            KeyCode::PageUp => self.select(cur.saturating_sub(10)),
            KeyCode::Home | KeyCode::Char('g') => self.select(0),
            KeyCode::End | KeyCode::Char('G') => self.select(last),
            KeyCode::Enter | KeyCode::Char('d') => self.detail = !self.detail,
            KeyCode::Char('s') => self.set_sort(self.sort.next()),
            KeyCode::Char(c @ '1'..='5') => {
                self.set_sort(SortKey::ALL[c as usize - '1' as usize]);
            }
            _ => {}
        }
        Action::Continue
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cli::top::rates::tests::{fixture, one_second_later};

    /// An app that has seen the fixture, then the fixture one second later.
    pub(crate) fn app() -> App {
        let mut app = App::new(Duration::from_secs(1), "/run/vrhost/api.sock".into());
        let t0 = Instant::now();
        let a = fixture();
        let b = one_second_later(&a);
        app.update(a, t0);
        app.update(b, t0 + Duration::from_secs(1));
        app
    }

    fn names(app: &App) -> Vec<&str> {
        app.rows.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn keys_move_select_sort_and_quit() {
        let mut a = app();
        let none = KeyModifiers::NONE;
        // Sorted by rx pps: the busy VR first, and selected.
        assert_eq!(names(&a), ["tenant-a", "tenant-b"]);
        assert_eq!(a.selected.as_deref(), Some("tenant-a"));
        assert_eq!(a.on_key(KeyCode::Char('j'), none), Action::Continue);
        assert_eq!(a.selected.as_deref(), Some("tenant-b"));
        a.on_key(KeyCode::Down, none);
        assert_eq!(a.selected.as_deref(), Some("tenant-b"), "stops at the end");
        a.on_key(KeyCode::Up, none);
        assert_eq!(a.selected.as_deref(), Some("tenant-a"));
        a.on_key(KeyCode::Char('1'), none);
        assert_eq!(a.sort, SortKey::Name);
        a.on_key(KeyCode::Char('s'), none);
        assert_eq!(a.sort, SortKey::RxPps);
        a.on_key(KeyCode::Enter, none);
        assert!(a.detail);
        assert_eq!(a.on_key(KeyCode::Esc, none), Action::Continue);
        assert!(!a.detail);
        assert_eq!(a.on_key(KeyCode::Esc, none), Action::Quit);
        assert_eq!(a.on_key(KeyCode::Char('q'), none), Action::Quit);
        assert_eq!(
            a.on_key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Quit
        );
    }

    #[test]
    fn selection_follows_the_vr_across_resorts_and_updates() {
        let mut a = app();
        a.on_key(KeyCode::Char('j'), KeyModifiers::NONE);
        assert_eq!(a.selected.as_deref(), Some("tenant-b"));
        // By name, tenant-b is still selected though it moved.
        a.on_key(KeyCode::Char('1'), KeyModifiers::NONE);
        assert_eq!(a.selected_index(), Some(1));
        // It vanishes: the selection moves to the first VR.
        let mut s = fixture();
        s.vrs.remove(1);
        a.update(s, Instant::now());
        assert_eq!(a.selected.as_deref(), Some("tenant-a"));
        a.set_error("x".into());
        assert!(a.error.is_some());
        a.update(fixture(), Instant::now());
        assert!(a.error.is_none());
    }
}
