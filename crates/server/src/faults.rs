//! Fault points: crashes and delays at exact moments, for the tests of what a cluster does when
//! a server dies between two steps (`docs/reliability.md`, "Fault points"). Off unless the
//! environment variable `CELLAR_FAULTS` names them when the process starts; a running server
//! never turns one on.
//!
//! `CELLAR_FAULTS="crash_after_wal=increment,open_region_delay_ms=3000"`:
//! - `crash_after_wal=KIND` (`increment`, `append`, `put`): the process kills itself with
//!   SIGKILL once a mutation of that kind is in the WAL and applied, before it is answered.
//! - `open_region_delay_ms=N`: a region server waits N ms at the start of every OPEN_REGION
//!   its master sends (before it takes its admin lock), so the open outlasts the master's
//!   `cluster.open_region_timeout_ms` and arrives after the master gave up on it.

use std::sync::OnceLock;

/// The fault points this process was started with.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Faults {
    crash_after_wal: Option<String>,
    open_region_delay_ms: Option<u64>,
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
                "open_region_delay_ms" => {
                    let ms = value.parse::<u64>().map_err(|_| {
                        format!(
                            "CELLAR_FAULTS: open_region_delay_ms={value:?} is not a number of ms"
                        )
                    })?;
                    f.open_region_delay_ms = Some(ms);
                }
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

/// The wait of `open_region_delay_ms` before an OPEN_REGION is handled, if asked for.
pub fn open_region_delay() -> Option<std::time::Duration> {
    faults()
        .open_region_delay_ms
        .map(std::time::Duration::from_millis)
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
        let f = Faults::parse("open_region_delay_ms=2500,crash_after_wal=put").expect("ok");
        assert_eq!(f.open_region_delay_ms, Some(2500));
        assert_eq!(f.crash_after_wal.as_deref(), Some("put"));
        assert!(Faults::parse("open_region_delay_ms=soon").is_err());
        assert!(Faults::parse("open_region_delay_ms=-1").is_err());
    }
}
