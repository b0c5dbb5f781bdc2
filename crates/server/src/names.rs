//! Table names (HBase's rules), region names, and where a table's regions live on disk.
//!
//! A name is `qualifier` or `namespace:qualifier`. Namespaces are `[A-Za-z0-9_]+`; qualifiers
//! are `[A-Za-z0-9_.-]+` not starting with `.` or `-`. `default:t` is `t`. The namespace
//! `hbase` belongs to the system (`hbase:meta`). On disk a table is
//! `data/<namespace>/<qualifier>` with `default` for names without a namespace, so ':' never
//! reaches a path.

mod md5;

use crate::error::ServerError;
use bytes::Bytes;
use std::path::{Path, PathBuf};

/// The catalog table, which holds every region's location (HBase's name for it).
pub const META_TABLE: &str = "hbase:meta";
/// Meta's region's encoded name: HBase's (a Jenkins hash of meta's old region name).
pub const META_ENCODED_NAME: &str = "1588230740";
pub const DEFAULT_NAMESPACE: &str = "default";
pub const SYSTEM_NAMESPACE: &str = "hbase";
/// Longest table name accepted (it becomes directory names).
const MAX_NAME_LEN: usize = 200;

/// The canonical form of a table name (`default:` dropped), checked against HBase's rules;
/// the error names the table and the rule it breaks.
pub fn canonical(name: &str) -> Result<String, ServerError> {
    let bad = |why: String| ServerError::invalid(format!("illegal table name '{name}': {why}"));
    if name.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(bad(format!("longer than {MAX_NAME_LEN} bytes")));
    }
    let (ns, qualifier) = match name.split_once(':') {
        Some((ns, q)) => (Some(ns), q),
        None => (None, name),
    };
    if let Some(ns) = ns {
        if ns.is_empty() {
            return Err(bad("the namespace before ':' is empty".into()));
        }
        if let Some(c) = ns
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
        {
            return Err(bad(format!(
                "namespace character '{c}' is not one of [A-Za-z0-9_]"
            )));
        }
    }
    let Some(first) = qualifier.chars().next() else {
        return Err(bad("the table qualifier after ':' is empty".into()));
    };
    if first == '.' || first == '-' {
        return Err(bad(format!("it may not start with '{first}'")));
    }
    if let Some(c) = qualifier
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(bad(format!("character '{c}' is not one of [A-Za-z0-9_.-]")));
    }
    Ok(match ns {
        Some(DEFAULT_NAMESPACE) | None => qualifier.to_string(),
        Some(ns) => format!("{ns}:{qualifier}"),
    })
}

/// Checks a namespace name against HBase's rule (`[A-Za-z0-9_]+`); the error names it.
pub fn check_namespace(ns: &str) -> Result<(), ServerError> {
    let bad = |why: String| ServerError::invalid(format!("illegal namespace name '{ns}': {why}"));
    if ns.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if ns.len() > MAX_NAME_LEN {
        return Err(bad(format!("longer than {MAX_NAME_LEN} bytes")));
    }
    match ns
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        Some(c) => Err(bad(format!("character '{c}' is not one of [A-Za-z0-9_]"))),
        None => Ok(()),
    }
}

/// [`canonical`], refusing the system namespace: what user tables may be called.
pub fn user_table(name: &str) -> Result<String, ServerError> {
    let n = canonical(name)?;
    if is_system(&n) {
        return Err(ServerError::invalid(format!(
            "table '{n}': the namespace '{SYSTEM_NAMESPACE}' is reserved for system tables"
        )));
    }
    Ok(n)
}

/// Whether a (canonical) name is in the system namespace.
pub fn is_system(name: &str) -> bool {
    name.split_once(':')
        .is_some_and(|(ns, _)| ns == SYSTEM_NAMESPACE)
}

/// `(namespace, qualifier)` of a canonical name.
pub fn split(name: &str) -> (&str, &str) {
    name.split_once(':').unwrap_or((DEFAULT_NAMESPACE, name))
}

/// Where the tables live: `<data_dir>/data`.
pub fn data_root(data_dir: &Path) -> PathBuf {
    data_dir.join("data")
}

/// `<data_dir>/data/<namespace>/<qualifier>`.
pub fn table_dir(data_dir: &Path, table: &str) -> PathBuf {
    let (ns, q) = split(table);
    data_root(data_dir).join(ns).join(q)
}

/// `<table dir>/<region id>`.
pub fn region_dir(data_dir: &Path, table: &str, region_id: u64) -> PathBuf {
    table_dir(data_dir, table).join(region_id.to_string())
}

/// The table a `data/<namespace>/<qualifier>` directory belongs to.
pub fn table_of_dir(namespace: &str, qualifier: &str) -> String {
    if namespace == DEFAULT_NAMESPACE {
        qualifier.to_string()
    } else {
        format!("{namespace}:{qualifier}")
    }
}

/// The meta row key of a region: `<table>,<start_key>,<region_id>`.
pub fn region_row(table: &str, start_key: &[u8], id: u64) -> Bytes {
    let mut row = Vec::with_capacity(table.len() + start_key.len() + 22);
    row.extend_from_slice(table.as_bytes());
    row.push(b',');
    row.extend_from_slice(start_key);
    row.push(b',');
    row.extend_from_slice(id.to_string().as_bytes());
    Bytes::from(row)
}

/// [`region_row`] as text (non-UTF-8 key bytes replaced), for names shown to people.
pub fn region_name(table: &str, start_key: &[u8], id: u64) -> String {
    String::from_utf8_lossy(&region_row(table, start_key, id)).into_owned()
}

/// A region's encoded name, as HBase derives it (clients and operators name regions by it):
/// the MD5 hex of its [`region_row`]; meta's is fixed.
pub fn encoded_region_name(table: &str, start_key: &[u8], id: u64) -> String {
    if table == META_TABLE {
        return META_ENCODED_NAME.to_string();
    }
    md5::hex_digest(&region_row(table, start_key, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hbase_rules() {
        assert_eq!(canonical("t1").expect("plain"), "t1");
        assert_eq!(canonical("default:t1").expect("default ns"), "t1");
        assert_eq!(canonical("ns_1:a.b-c_d").expect("ns"), "ns_1:a.b-c_d");
        for (bad, why) in [
            ("", "empty"),
            (":t", "namespace"),
            ("ns:", "qualifier"),
            (".t", "start with '.'"),
            ("-t", "start with '-'"),
            ("t/x", "'/'"),
            ("t x", "' '"),
            ("n-s:t", "namespace character '-'"),
            ("a:b:c", "':'"),
        ] {
            let e = canonical(bad).expect_err(bad).to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
        assert!(user_table("hbase:meta")
            .expect_err("reserved")
            .to_string()
            .contains("reserved"));
        assert!(is_system("hbase:meta") && !is_system("meta"));
    }

    #[test]
    fn dirs_round_trip() {
        let d = Path::new("/d");
        assert_eq!(table_dir(d, "t"), Path::new("/d/data/default/t"));
        assert_eq!(region_dir(d, "ns:t", 7), Path::new("/d/data/ns/t/7"));
        assert_eq!(table_of_dir("default", "t"), "t");
        assert_eq!(table_of_dir("ns", "t"), "ns:t");
    }
}
