//! The benches' one error type, and the two helpers that build it where a
//! bench says what it was doing ([`Context`]) or why it gives up ([`bail!`]).

use std::path::PathBuf;

/// What the benches' functions return.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// An error of any kind, as [`BenchError::Context`] keeps it.
type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a bench could not run or report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A route table could not be imported.
    #[error("{}: {error}", path.display())]
    Import {
        /// The table.
        path: PathBuf,
        /// What went wrong (in the message, not a source: its text already
        /// says what its own source says).
        error: vrhost_fib::import::ImportError,
    },
    /// A report or an API answer did not (de)serialize.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A file, process or socket operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A call to the daemon's API failed.
    #[error(transparent)]
    Client(#[from] vrhost_client::ClientError),
    /// The daemon process could not be started or stopped.
    #[error(transparent)]
    Daemon(#[from] vrhost_lab::DaemonError),
    /// A lab topology could not be built or torn down.
    #[error(transparent)]
    Lab(#[from] vrhost_lab::LabError),
    /// A command in a lab namespace (`ip`, `sysctl`, a tool) failed.
    #[error(transparent)]
    Cmd(#[from] vrhost_lab::CmdError),
    /// A daemon config the bench wrote was refused.
    #[error(transparent)]
    Config(#[from] vrhost_host::config::ConfigError),
    /// A classifier rule was refused.
    #[error(transparent)]
    Rule(#[from] vrhost_host::classify::RuleError),
    /// A VR process could not be started.
    #[error(transparent)]
    Spawn(#[from] vrhost_host::spawn::SpawnError),
    /// A VR's instances could not be placed on cores.
    #[error(transparent)]
    Alloc(#[from] vrhost_host::alloc::AllocError),
    /// The host worker did not answer a request.
    #[error(transparent)]
    Mailbox(#[from] vrhost_host::MailboxError),
    /// A VR's shared memory region could not be made.
    #[error(transparent)]
    Region(#[from] vrhost_shm::RegionError),
    /// The memory traffic generator refused its config.
    #[error(transparent)]
    MemPort(#[from] vrhost_io::mem::MemPortError),
    /// A test frame could not be built.
    #[error(transparent)]
    Frame(#[from] vrhost_packet::build::BuildError),
    /// A system call failed.
    #[error(transparent)]
    Os(#[from] rustix::io::Errno),
    /// The fast path, or the live generator and its sink.
    #[error(transparent)]
    Fast(#[from] vrhost_fast::FastError),
    /// A number the bench read (a counter in sysfs, a tool's output) did
    /// not parse.
    #[error(transparent)]
    Number(#[from] std::num::ParseIntError),
    /// A thread the bench waited on went away without an answer.
    #[error(transparent)]
    Gone(#[from] std::sync::mpsc::RecvError),
    /// Something a bench did failed; `what` says what it was doing.
    #[error("{what}: {error}")]
    Context {
        /// What the bench was doing.
        what: String,
        /// The error (in the message, not a source: the errors here say
        /// their own sources in their text).
        error: Source,
    },
    /// The bench gave up (a result it cannot use, a broken invariant, a
    /// thread that panicked); the message says why.
    #[error("{0}")]
    Failed(String),
}

/// Say what was being done when an error happened (or a value was
/// missing), as the error's context.
pub trait Context<T> {
    /// The error, or a missing value, as [`BenchError::Context`] /
    /// [`BenchError::Failed`] with `what`.
    ///
    /// # Errors
    /// When `self` is an error or `None`.
    fn context(self, what: impl std::fmt::Display) -> Result<T>;

    /// [`Context::context`] with a message made only on error.
    ///
    /// # Errors
    /// As [`Context::context`].
    fn with_context<D: std::fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: Into<Source>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl std::fmt::Display) -> Result<T> {
        self.map_err(|e| BenchError::Context {
            what: what.to_string(),
            error: e.into(),
        })
    }

    fn with_context<D: std::fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| BenchError::Context {
            what: what().to_string(),
            error: e.into(),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl std::fmt::Display) -> Result<T> {
        self.ok_or_else(|| BenchError::Failed(what.to_string()))
    }

    fn with_context<D: std::fmt::Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.ok_or_else(|| BenchError::Failed(what().to_string()))
    }
}

/// Give up with [`BenchError::Failed`], formatted like `format!`.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::BenchError::Failed(format!($($arg)*)))
    };
}

/// [`BenchError::Failed`], formatted like `format!`.
#[macro_export]
macro_rules! failed {
    ($($arg:tt)*) => {
        $crate::BenchError::Failed(format!($($arg)*))
    };
}
