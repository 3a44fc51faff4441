//! vrhost fib (placeholder, being written).
