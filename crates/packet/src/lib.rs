//! vrhost packet (placeholder, being written).
