//! Fault points: crashes and delays at exact moments, for the tests of what a cluster does when
//! a server dies between two steps (`docs/reliability.md`, "Fault points"). Off unless the
//! environment variable `CELLAR_FAULTS` names them when the process starts; a running server
//! never turns one on.
//!
//! `CELLAR_FAULTS="crash_after_wal=increment"`:
//! - `crash_after_wal=KIND` (`increment`, `append`, `put`): the process kills itself with
//!   SIGKILL once a mutation of that kind is in the WAL and applied, before it is answered.

use std::sync::OnceLock;

/// The fault points this process was started with.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Faults {
    crash_after_wal: Option<String>,
}

impl Faults {
    /// Parses `CELLAR_FAULTS`' value; unknown names are errors, so a test cannot silently
    /// run without the fault it asked for.
    pub fn parse(spec: &str) -> Result<Faults, String> {
        let mut f = Faults::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("CELLAR_FAULTS: {item:?} is not NAME=VALUE"))?;
            match key {
                "crash_after_wal" => f.crash_after_wal = Some(value.to_string()),
                _ => return Err(format!("CELLAR_FAULTS: unknown fault point {key:?}")),
            }
        }
        Ok(f)
    }
}

static FAULTS: OnceLock<Faults> = OnceLock::new();

fn faults() -> &'static Faults {
    FAULTS.get_or_init(|| match std::env::var("CELLAR_FAULTS") {
        Ok(spec) => match Faults::parse(&spec) {
            Ok(f) => {
                tracing::warn!(?f, "fault points are on (CELLAR_FAULTS): this server will crash or stall on purpose");
                f
            }
            Err(e) => {
                // A test asked for a fault it would not get: stop rather than run without it.
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
        Err(_) => Faults::default(),
    })
}

/// Reads `CELLAR_FAULTS` now (at start, so a bad value stops the process before it serves).
pub fn init() {
    let _ = faults();
}

/// A mutation of `kind` is in the WAL and applied: SIGKILL here when asked to.
pub fn after_wal(kind: &str) {
    if faults().crash_after_wal.as_deref() == Some(kind) {
        tracing::warn!(kind, "fault point crash_after_wal: killing this process");
        // `kill -9` of itself: nothing after this point runs, as in a real crash.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_specs_parse_and_unknown_names_are_refused() {
        let f = Faults::parse(" crash_after_wal=increment, ").expect("ok");
        assert_eq!(f.crash_after_wal.as_deref(), Some("increment"));
        assert_eq!(Faults::parse("").expect("empty"), Faults::default());
        assert!(Faults::parse("crash_after=increment").is_err());
        assert!(Faults::parse("crash_after_wal").is_err());
    }
}
