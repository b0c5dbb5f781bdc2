//! YCSB, re-implemented faithfully: its property files and names, its generators and
//! constants, its core workload, its load/run phases and its output format.
//! `cellar bench load|run` (see [`main`]).
//!
//! - [`properties`]: `-P` files and `-p` overrides.
//! - [`generator`]: YCSB's number generators (counter, uniform, zipfian, scrambled zipfian,
//!   skewed latest, hotspot, discrete, ...).
//! - [`workload`]: YCSB's `CoreWorkload`: key names, field values, operation choice.
//! - [`db`]: the interface a target implements, and the measurement sink.
//! - the runner, measurements, output and the targets (native client, embedded engine).

pub mod cli;
pub mod db;
pub mod measure;
pub mod output;
pub mod runner;
pub mod targets;
pub mod generator;
pub mod properties;
pub mod workload;

/// Runs `cellar bench load` (`phase` = "load") or `cellar bench run` with YCSB-style arguments
/// (`-P FILE`, `-p NAME=VALUE`, `-threads N`, `-target OPS`, `-s`, `--db URL`).
pub fn main(phase: &str, _args: Vec<String>) -> Result<(), String> {
    Err(format!("cellar bench {phase} is not built yet"))
}
