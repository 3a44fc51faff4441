//! The benches' one error type.

use std::path::PathBuf;

/// Why a bench could not run or report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A route table could not be imported.
    #[error("{}: {source}", path.display())]
    Import {
        /// The table.
        path: PathBuf,
        /// What went wrong.
        source: vrhost_fib::import::ImportError,
    },
    /// A report did not serialize.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}
