//! YCSB's configuration: `-P` property files (the subset of Java's `.properties` format that
//! YCSB's workload files use) and `-p NAME=VALUE` overrides, later settings winning.

use std::collections::HashMap;
use std::path::Path;

/// Property names and their values, as YCSB's `java.util.Properties`.
#[derive(Debug, Clone, Default)]
pub struct Properties {
    values: HashMap<String, String>,
}

impl Properties {
    pub fn new() -> Properties {
        Properties::default()
    }

    /// Reads `path`: `key=value`, `key: value` or `key value` lines, `#`/`!` comments and
    /// blank lines; keys and values trimmed. Settings override earlier ones.
    pub fn load_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read property file {}: {e}", path.display()))?;
        self.load_str(&text)
            .map_err(|(line, why)| format!("{}:{line}: {why}", path.display()))
    }

    /// Parses property text; an error carries the 1-based line number.
    fn load_str(&mut self, text: &str) -> Result<(), (usize, String)> {
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let (key, value) = split_entry(line);
            if key.is_empty() {
                return Err((
                    index + 1,
                    format!("no property name before the value in {line:?}"),
                ));
            }
            self.set(key, value);
        }
        Ok(())
    }

    /// Sets one property (a `-p` override).
    pub fn set(&mut self, key: &str, value: &str) {
        self.values
            .insert(key.trim().to_string(), value.trim().to_string());
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    pub fn get_str(&self, key: &str, default: &str) -> String {
        self.get(key).unwrap_or(default).to_string()
    }

    pub fn get_u64(&self, key: &str, default: u64) -> Result<u64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| format!("property {key}: {v:?} is not a non-negative integer")),
        }
    }

    pub fn get_f64(&self, key: &str, default: f64) -> Result<f64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(format!("property {key}: {v:?} is not a number")),
            },
        }
    }

    /// `true`/`false` in any case. (Java's `Boolean.parseBoolean` reads anything else as
    /// false; a typo here is an error instead, so it cannot silently change the workload.)
    pub fn get_bool(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(format!("property {key}: {v:?} is neither true nor false")),
        }
    }
}

/// Splits at the first `=` or `:`, or else at the first whitespace, as Java's format does.
fn split_entry(line: &str) -> (&str, &str) {
    let at = line
        .find(['=', ':'])
        .map(|i| (i, i + 1))
        .or_else(|| line.find(char::is_whitespace).map(|i| (i, i)));
    match at {
        Some((key_end, value_start)) => (line[..key_end].trim(), line[value_start..].trim()),
        None => (line, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_java_subset_and_overrides() {
        let mut p = Properties::new();
        p.load_str(
            "# comment\n! also a comment\n\nrecordcount=1000\n  operationcount : 50 \n\
             workload site.ycsb.workloads.CoreWorkload\nempty\nrecordcount=2000\n",
        )
        .expect("valid text");
        assert_eq!(p.get("recordcount"), Some("2000"));
        assert_eq!(p.get("operationcount"), Some("50"));
        assert_eq!(p.get("workload"), Some("site.ycsb.workloads.CoreWorkload"));
        assert_eq!(p.get("empty"), Some(""));
        p.set("recordcount", "7");
        assert_eq!(p.get_u64("recordcount", 0), Ok(7));
        assert_eq!(p.get_u64("missing", 3), Ok(3));
        assert_eq!(p.get_str("missing", "d"), "d");
    }

    #[test]
    fn bad_values_name_the_property() {
        let mut p = Properties::new();
        p.set("fieldcount", "ten");
        p.set("readproportion", "half");
        p.set("readallfields", "yes");
        let e = p.get_u64("fieldcount", 10).expect_err("not a number");
        assert!(e.contains("fieldcount") && e.contains("ten"), "{e}");
        let e = p.get_f64("readproportion", 0.5).expect_err("not a number");
        assert!(e.contains("readproportion") && e.contains("half"), "{e}");
        let e = p.get_bool("readallfields", true).expect_err("not a bool");
        assert!(e.contains("readallfields") && e.contains("yes"), "{e}");
    }

    #[test]
    fn file_errors_name_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("broken");
        std::fs::write(&path, "a=1\n# c\n=5\n").expect("write");
        let e = Properties::new().load_file(&path).expect_err("empty key");
        assert!(e.contains("broken:3"), "{e}");
        let e = Properties::new()
            .load_file(&dir.path().join("absent"))
            .expect_err("missing file");
        assert!(e.contains("absent"), "{e}");
    }
}
