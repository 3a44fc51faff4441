//! vrhost host (placeholder, being written).
