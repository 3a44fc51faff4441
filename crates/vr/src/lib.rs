//! vrhost vr (placeholder, being written).
