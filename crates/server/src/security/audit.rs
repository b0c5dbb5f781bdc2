//! The audit log: every authentication failure and every denied call, one JSON object per
//! line (`time`, `event`, `user`, `real_user`, `address`, `protocol`, `action`, `object`, `reason`), in a
//! file of its own that an operator can ship. Lines are appended whole (one `write` of a
//! complete line on a file opened for appending), so a crash never leaves half a line behind
//! another. A line that cannot be written is reported in the server log and the call goes on.

use parking_lot::Mutex;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A call was refused for want of a permission.
    Denied,
    /// A client could not be identified (no certificate, a user the server may not take).
    AuthenticationFailed,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::Denied => "denied",
            Event::AuthenticationFailed => "authentication_failed",
        }
    }
}

/// One audit line's fields.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    pub event: Event,
    pub user: Option<&'a str>,
    /// The user who made the call for `user` (a gateway acting for its caller), if any.
    pub real_user: Option<&'a str>,
    pub address: Option<std::net::IpAddr>,
    pub protocol: &'a str,
    pub action: &'a str,
    pub object: &'a str,
    pub reason: &'a str,
}

/// An open audit log.
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens (creating) `path` for appending.
    pub fn open(path: &Path) -> Result<AuditLog, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                format!(
                    "cannot create the audit log's directory {}: {e}",
                    dir.display()
                )
            })?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line.
    pub fn record(&self, r: &Record<'_>) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let line = serde_json::json!({
            "time_ms": now,
            "event": r.event.name(),
            "user": r.user,
            "real_user": r.real_user,
            "address": r.address.map(|a| a.to_string()),
            "protocol": r.protocol,
            "action": r.action,
            "object": r.object,
            "reason": r.reason,
        });
        let mut text = line.to_string();
        text.push('\n');
        if let Err(e) = self.file.lock().write_all(text.as_bytes()) {
            tracing::error!(path = %self.path.display(), error = %e, "cannot write the audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_whole_json_objects() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = AuditLog::open(&dir.path().join("sub/audit.log")).expect("open");
        for user in [Some("alice"), None] {
            log.record(&Record {
                event: Event::Denied,
                user,
                real_user: None,
                address: Some([127, 0, 0, 1].into()),
                protocol: "native",
                action: "WRITE",
                object: "table=t",
                reason: "Insufficient permissions \"quoted\"\nnewline",
            });
        }
        let text = std::fs::read_to_string(log.path()).expect("read");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["user"], "alice");
        assert_eq!(lines[1]["user"], serde_json::Value::Null);
        assert_eq!(lines[0]["event"], "denied");
        assert_eq!(lines[0]["address"], "127.0.0.1");
    }
}
