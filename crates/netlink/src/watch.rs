//! [`RouteWatch`]: the thread that follows one namespace's routing table.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use netlink_packet_core::{NLM_F_DUMP_INTR, NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::route::RouteMessage;

use crate::route::{classify, gateway_of, key_of};
use crate::sys::{self, NetnsRef, NlSocket, Recv, StopEvent};
use crate::table::Table;
use crate::{RouteBatch, SkipCounts, WatchError, WatchFilter};

/// How changes are gathered into batches, and how many may wait unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOptions {
    /// A batch goes out this long after the first change in it (20 ms by
    /// default), or sooner when it is full.
    pub window: Duration,
    /// Changes in one batch at most (4096 by default; the daemon cuts a
    /// batch into control messages of `vrhost_proto::CONTROL_CHUNK` routes
    /// anyway).
    pub max_routes: usize,
    /// The socket's receive buffer, bytes (32 MiB by default: ~200K route
    /// events while the batch callback is busy; root may exceed
    /// `net.core.rmem_max`). When it overflows, the kernel drops events,
    /// and the watch dumps the table again ([`WatchStats::overruns`]).
    pub socket_buffer: usize,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            window: Duration::from_millis(20),
            max_routes: 4096,
            socket_buffer: 32 << 20,
        }
    }
}

/// What the watch has seen and done, since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Route messages received (dumped, added, deleted), of any table.
    pub seen: u64,
    /// Route additions and replacements taken.
    pub taken: u64,
    /// Route additions not taken, by reason.
    pub skipped: SkipCounts,
    /// Route deletions of a route the watch held.
    pub withdrawn: u64,
    /// Route deletions of routes it did not hold (skipped ones).
    pub deletes_ignored: u64,
    /// Deletions of one next hop of an IPv6 multipath route, each
    /// answered by a new dump (the watch holds the first next hop only).
    pub sibling_deletes: u64,
    /// Routes taken that had more than one next hop: only the first is
    /// handed on.
    pub multipath_truncated: u64,
    /// Prefixes changed and changed back within a window: nothing handed
    /// on for them.
    pub coalesced: u64,
    /// Batches handed on.
    pub batches: u64,
    /// Routes added or replaced in them.
    pub added: u64,
    /// Prefixes deleted in them.
    pub deleted: u64,
    /// Routes (prefixes) held now.
    pub routes: u64,
    /// Route dumps asked of the kernel (1 + resyncs).
    pub dumps: u64,
    /// Times the kernel dropped events (socket receive buffer full).
    pub overruns: u64,
    /// Dumps the kernel said were inconsistent (the table changed during
    /// the dump), each followed by another.
    pub dumps_interrupted: u64,
    /// Dump requests asked again: refused for want of buffer (`ENOBUFS`),
    /// or lost (no answer for a second).
    pub dump_retries: u64,
    /// Netlink messages that did not parse.
    pub decode_errors: u64,
    /// The initial dump has been handed on.
    pub synced: bool,
    /// A dump is under way (changes are handed on after it).
    pub dumping: bool,
}

/// Follows the kernel routing table of one network namespace and hands
/// its changes on in [`RouteBatch`]es, from a thread of its own. Stopped
/// by [`stop`](Self::stop) or on drop.
#[derive(Debug)]
pub struct RouteWatch {
    stop: Arc<StopEvent>,
    stats: Arc<Mutex<WatchStats>>,
    thread: Option<JoinHandle<Result<(), WatchError>>>,
}

impl std::fmt::Debug for StopEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopEvent")
    }
}

impl RouteWatch {
    /// Start watching `netns`: a thread enters it, opens a
    /// `NETLINK_ROUTE` socket there, dumps the table (handed to
    /// `on_batch` as the first batches, [`WatchStats::synced`] then true),
    /// then follows route events. `on_batch` runs on the watch's thread
    /// (while it runs, events wait in the socket's buffer; a callback that
    /// never returns keeps [`stop`](Self::stop) waiting too).
    ///
    /// # Errors
    /// The namespace cannot be opened or entered, or the socket cannot be
    /// set up ([`WatchError`]); then no thread is left running.
    pub fn start(
        netns: NetnsRef,
        filter: WatchFilter,
        options: WatchOptions,
        mut on_batch: impl FnMut(RouteBatch) + Send + 'static,
    ) -> Result<Self, WatchError> {
        let stop = Arc::new(StopEvent::new()?);
        let sink = Box::new(move |b| {
            on_batch(b);
            true
        });
        Self::spawn(netns, filter, options, stop, sink)
    }

    /// As [`start`](Self::start), the batches sent on a channel that holds
    /// `depth` batches. When it is full the watch waits (the kernel keeps
    /// events in the socket's buffer meanwhile), until there is room or
    /// the watch is stopped. The watch ends when the receiver is dropped.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn channel(
        netns: NetnsRef,
        filter: WatchFilter,
        options: WatchOptions,
        depth: usize,
    ) -> Result<(Self, Receiver<RouteBatch>), WatchError> {
        let (tx, rx): (SyncSender<RouteBatch>, _) = sync_channel(depth);
        let stop = Arc::new(StopEvent::new()?);
        let stopping = stop.clone();
        let sink = Box::new(move |mut b| {
            loop {
                match tx.try_send(b) {
                    Ok(()) => return true,
                    Err(TrySendError::Disconnected(_)) => return false,
                    Err(TrySendError::Full(back)) => {
                        if stopping.fired() {
                            return false;
                        }
                        b = back;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        });
        let w = Self::spawn(netns, filter, options, stop, sink)?;
        Ok((w, rx))
    }

    fn spawn(
        netns: NetnsRef,
        filter: WatchFilter,
        options: WatchOptions,
        stop: Arc<StopEvent>,
        sink: Sink,
    ) -> Result<Self, WatchError> {
        let stats = Arc::new(Mutex::new(WatchStats::default()));
        let (ready_tx, ready_rx) = sync_channel(1);
        let name = format!("route-watch {}", netns.describe());
        let (stop2, stats2) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || {
                let setup = sys::enter(&netns).and_then(|()| NlSocket::open(options.socket_buffer));
                let sock = match setup {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(());
                    }
                };
                Worker::new(sock, filter, options, sink, stats2).run(&stop2)
            })
            .map_err(|source| WatchError::Thread { source })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self {
                stop,
                stats,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(WatchError::Ended),
        }
    }

    /// What the watch has seen and done so far.
    pub fn stats(&self) -> WatchStats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the thread still runs (it ends on an error, or when the
    /// receiver of [`channel`](Self::channel) is dropped).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stop the thread and wait for it; the final counts.
    ///
    /// # Errors
    /// The error that had ended the thread, if one did.
    pub fn stop(mut self) -> Result<WatchStats, WatchError> {
        self.halt()?;
        Ok(self.stats())
    }

    fn halt(&mut self) -> Result<(), WatchError> {
        self.stop.fire();
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| WatchError::Panicked)?,
            None => Ok(()),
        }
    }
}

impl Drop for RouteWatch {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

type Sink = Box<dyn FnMut(RouteBatch) -> bool + Send>;

/// Which dump is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dump {
    Links,
    Routes,
}

/// The watch's thread.
struct Worker {
    sock: NlSocket,
    filter: WatchFilter,
    options: WatchOptions,
    sink: Sink,
    shared: Arc<Mutex<WatchStats>>,
    stats: WatchStats,
    table: Table,
    links: HashMap<u32, String>,
    /// Dumps to ask for after the current one.
    queued: VecDeque<Dump>,
    /// The dump under way and its sequence number.
    current: Option<(Dump, u32)>,
    /// Dump again once the current dump is done: it was inconsistent, or
    /// events were lost meanwhile (one socket runs one dump at a time).
    redo: bool,
    /// When the first change not yet handed on arrived.
    first_dirty: Option<Instant>,
    /// When the current dump was asked for or last gave a message.
    dump_progress: Instant,
}

/// `ENOBUFS`: a dump request that found the receive buffer full.
const ENOBUFS: i32 = 105;
/// `EBUSY`: a dump request while the socket's dump still runs.
const EBUSY: i32 = 16;
/// A dump that gives nothing for this long was lost (its request or its
/// answer dropped for want of buffer): it is asked for again.
const DUMP_STALL: Duration = Duration::from_secs(1);

/// Receive buffer: larger than a dump chunk (the kernel fills at most
/// 32 KiB per read).
const BUF: usize = 64 << 10;

impl Worker {
    fn new(
        sock: NlSocket,
        filter: WatchFilter,
        options: WatchOptions,
        sink: Sink,
        shared: Arc<Mutex<WatchStats>>,
    ) -> Self {
        Self {
            sock,
            filter,
            options,
            sink,
            shared,
            stats: WatchStats::default(),
            table: Table::default(),
            links: HashMap::new(),
            queued: VecDeque::new(),
            current: None,
            redo: false,
            first_dirty: None,
            dump_progress: Instant::now(),
        }
    }

    fn run(mut self, stop: &StopEvent) -> Result<(), WatchError> {
        self.queued.extend([Dump::Links, Dump::Routes]);
        self.next_dump()?;
        let mut buf = vec![0u8; BUF];
        loop {
            let timeout = match (self.current, self.first_dirty) {
                (Some(_), _) => Some(DUMP_STALL.saturating_sub(self.dump_progress.elapsed())),
                (None, Some(t)) => Some(self.options.window.saturating_sub(t.elapsed())),
                (None, None) => None,
            };
            self.publish();
            let ready = sys::wait(&self.sock, stop, timeout)?;
            if ready.stop {
                return Ok(());
            }
            if ready.socket && !self.drain(&mut buf)? {
                return Ok(());
            }
            if self.current.is_some() && self.dump_progress.elapsed() >= DUMP_STALL {
                self.stats.dump_retries += 1;
                self.current = None;
                self.resync()?;
            }
            if !self.maybe_flush()? {
                return Ok(());
            }
        }
    }

    fn publish(&mut self) {
        self.stats.routes = self.table.len() as u64;
        self.stats.dumping = self.current.is_some();
        *self.shared.lock().unwrap_or_else(PoisonError::into_inner) = self.stats;
    }

    fn next_dump(&mut self) -> Result<(), WatchError> {
        self.current = match self.queued.pop_front() {
            Some(d) => {
                if d == Dump::Routes {
                    self.stats.dumps += 1;
                }
                self.dump_progress = Instant::now();
                Some((d, self.sock.request_dump(d == Dump::Links)?))
            }
            None => None,
        };
        Ok(())
    }

    /// Dump links and routes again (events were lost, or a dump was
    /// inconsistent); what changed meanwhile is handed on after it.
    fn resync(&mut self) -> Result<(), WatchError> {
        if self.current.is_some() {
            self.redo = true;
            return Ok(());
        }
        self.table.clear_for_resync();
        self.queued.clear();
        self.queued.extend([Dump::Links, Dump::Routes]);
        self.redo = false;
        self.next_dump()
    }

    /// Read and handle everything queued on the socket. False: the
    /// receiver is gone, stop.
    fn drain(&mut self, buf: &mut [u8]) -> Result<bool, WatchError> {
        loop {
            let n = match self.sock.recv(buf)? {
                Recv::Data(n) => n,
                Recv::Empty => return Ok(true),
                Recv::Overrun => {
                    self.stats.overruns += 1;
                    self.resync()?;
                    continue;
                }
            };
            let mut off = 0;
            while off + 16 <= n {
                let len = u32::from_ne_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]])
                    as usize;
                if len < 16 || off + len > n {
                    self.stats.decode_errors += 1;
                    break;
                }
                match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[off..off + len]) {
                    Ok(m) => self.handle(m)?,
                    Err(_) => self.stats.decode_errors += 1,
                }
                // Messages are 4-byte aligned.
                off += (len + 3) & !3;
            }
            if !self.flush_full()? {
                return Ok(false);
            }
        }
    }

    fn handle(&mut self, m: NetlinkMessage<RouteNetlinkMessage>) -> Result<(), WatchError> {
        let seq = m.header.sequence_number;
        let ours = self.current.is_some_and(|(_, s)| s == seq && seq != 0);
        if ours {
            self.dump_progress = Instant::now();
        }
        if ours && m.header.flags & NLM_F_DUMP_INTR != 0 && !self.redo {
            // Every message after the change carries the flag: count once.
            self.stats.dumps_interrupted += 1;
            self.redo = true;
        }
        match m.payload {
            NetlinkPayload::Done(_) if ours => self.dump_done()?,
            NetlinkPayload::Error(e) if ours => {
                let code = e.code.map_or(0, |c| -c.get());
                if code != ENOBUFS && code != EBUSY {
                    return Err(WatchError::Dump {
                        message: std::io::Error::from_raw_os_error(code).to_string(),
                    });
                }
                // The request found the receive buffer full of events (or,
                // after a stall, the old dump still running): ask again.
                self.stats.dump_retries += 1;
                self.current = None;
                self.resync()?;
            }
            NetlinkPayload::Overrun(_) => {
                self.stats.overruns += 1;
                self.resync()?;
            }
            NetlinkPayload::InnerMessage(msg) => match msg {
                RouteNetlinkMessage::NewRoute(r) => self.new_route(&r),
                RouteNetlinkMessage::DelRoute(r) => self.del_route(&r)?,
                RouteNetlinkMessage::NewLink(l) => self.new_link(&l),
                RouteNetlinkMessage::DelLink(l) => {
                    self.links.remove(&l.header.index);
                }
                _ => {}
            },
            _ => {}
        }
        Ok(())
    }

    fn dump_done(&mut self) -> Result<(), WatchError> {
        if self.redo {
            self.current = None;
            return self.resync();
        }
        self.next_dump()?;
        if self.current.is_none() && !self.stats.synced {
            // The initial state goes out at once, whatever the window.
            self.flush_all()?;
            self.stats.synced = true;
        }
        Ok(())
    }

    fn new_link(&mut self, l: &LinkMessage) {
        for a in &l.attributes {
            if let LinkAttribute::IfName(n) = a {
                self.links.insert(l.header.index, n.clone());
            }
        }
    }

    fn new_route(&mut self, m: &RouteMessage) {
        self.stats.seen += 1;
        match classify(m, &self.filter, &self.links) {
            Ok(r) => {
                self.stats.taken += 1;
                if r.dropped_nexthops > 0 {
                    self.stats.multipath_truncated += 1;
                }
                self.table.upsert(r);
            }
            Err(why) => {
                self.stats.skipped.bump(why);
                // A route taken before may have been replaced by one that
                // is not (`ip route replace ... proto kernel`).
                if let Some((p, metric)) = key_of(m, &self.filter) {
                    self.table.remove(p, metric);
                }
            }
        }
        self.mark_dirty();
    }

    fn del_route(&mut self, m: &RouteMessage) -> Result<(), WatchError> {
        self.stats.seen += 1;
        let Some((p, metric)) = key_of(m, &self.filter) else {
            self.stats.deletes_ignored += 1;
            return Ok(());
        };
        // IPv6 removes one next hop of a multipath route at a time (`ip -6
        // route del P via G`), announced as a delete of that next hop
        // alone; the route stays with the others. The watch keeps only
        // the first next hop, so it asks the kernel what is left.
        if let (IpNet::V6(_), Some(g), Some(held)) = (p, gateway_of(m), self.table.get(p, metric))
            && (held.dropped_nexthops > 0 || held.via != Some(g))
        {
            self.stats.sibling_deletes += 1;
            return self.resync();
        }
        if self.table.remove(p, metric) {
            self.stats.withdrawn += 1;
        } else {
            self.stats.deletes_ignored += 1;
        }
        self.mark_dirty();
        Ok(())
    }

    fn mark_dirty(&mut self) {
        if self.first_dirty.is_none() && self.table.dirty_len() > 0 {
            self.first_dirty = Some(Instant::now());
        }
    }

    fn emit(&mut self, limit: usize) -> Result<bool, WatchError> {
        while self.table.dirty_len() >= limit.max(1) {
            let Some(b) = self
                .table
                .flush(self.options.max_routes, &mut self.stats.coalesced)
            else {
                continue;
            };
            self.stats.batches += 1;
            self.stats.added += b.add.len() as u64;
            self.stats.deleted += b.del.len() as u64;
            self.publish();
            if !(self.sink)(b) {
                return Ok(false);
            }
        }
        if self.table.dirty_len() == 0 {
            self.first_dirty = None;
        }
        Ok(true)
    }

    /// Hand on full batches (not during a dump).
    fn flush_full(&mut self) -> Result<bool, WatchError> {
        if self.current.is_some() {
            return Ok(true);
        }
        self.emit(self.options.max_routes)
    }

    /// Hand on everything pending.
    fn flush_all(&mut self) -> Result<bool, WatchError> {
        self.emit(1)
    }

    /// Hand on everything pending once the window has passed.
    fn maybe_flush(&mut self) -> Result<bool, WatchError> {
        match (self.current, self.first_dirty) {
            (None, Some(t)) if t.elapsed() >= self.options.window => self.flush_all(),
            _ => Ok(true),
        }
    }
}
