//! vrhost shm (placeholder, being written).
