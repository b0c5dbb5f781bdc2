//! Cellar Rust client (to be written).
