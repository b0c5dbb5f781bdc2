//! Cellar benchmarks.
