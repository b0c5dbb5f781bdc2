//! YCSB, re-implemented (being written): `cellar bench load|run`.

/// Runs `cellar bench load` (`phase` = "load") or `cellar bench run` with YCSB-style arguments
/// (`-P FILE`, `-p NAME=VALUE`, `-threads N`, `-target OPS`, `-s`, `--db URL`).
pub fn main(phase: &str, _args: Vec<String>) -> Result<(), String> {
    Err(format!("cellar bench {phase} is not built yet"))
}
