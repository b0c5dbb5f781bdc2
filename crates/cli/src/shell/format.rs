//! How the shell prints things, following HBase's shell: two-column tables with a header,
//! bytes escaped like HBase's `Bytes.toStringBinary`, family descriptions as Ruby hashes.

use cellar_model::{BloomType, Cell, FamilySchema};
use std::time::Duration;

/// Width of the first column of two-column output.
const KEY_WIDTH: usize = 26;

pub use cellar_model::to_string_binary;

/// A cell timestamp (milliseconds since the epoch) as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ`;
/// timestamps past year 9999 print as the raw number.
pub fn format_timestamp(ms: u64) -> String {
    const MAX_MS: u64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    if ms > MAX_MS {
        return ms.to_string();
    }
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Year, month, day of a count of days since 1970-01-01 (proleptic Gregorian calendar),
/// computed by 400-year eras of 146 097 days starting on March 1st.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// A header line of two-column output (`ROW  COLUMN+CELL`).
pub fn header(left: &str, right: &str) -> String {
    format!("{left:<width$} {right}", width = KEY_WIDTH + 1)
}

/// A body line of two-column output.
pub fn line(left: &str, right: &str) -> String {
    format!(" {left:<KEY_WIDTH$} {right}")
}

fn column_name(cell: &Cell) -> String {
    format!(
        "{}:{}",
        to_string_binary(&cell.family),
        to_string_binary(&cell.qualifier)
    )
}

/// One cell of a scan: ` row   column=cf:q, timestamp=..., value=v`.
pub fn scan_cell(cell: &Cell) -> String {
    line(
        &to_string_binary(&cell.row),
        &format!(
            "column={}, timestamp={}, {}",
            column_name(cell),
            format_timestamp(cell.timestamp),
            value_or_type(cell)
        ),
    )
}

/// The table line of `describe`: its name, and HBase's `TABLE_ATTRIBUTES` when it sets any.
pub fn table_attributes(table: &str, o: &cellar_model::TableOptions) -> String {
    let mut attrs = Vec::new();
    if o.durability != cellar_model::Durability::UseDefault {
        attrs.push(format!("DURABILITY => '{}'", o.durability));
    }
    if let Some(n) = o.max_file_size {
        attrs.push(format!("MAX_FILESIZE => '{n}'"));
    }
    if o.read_only {
        attrs.push("READONLY => 'true'".to_string());
    }
    if attrs.is_empty() {
        table.to_string()
    } else {
        format!("{table}, {{TABLE_ATTRIBUTES => {{{}}}}}", attrs.join(", "))
    }
}

/// `value=...`, or a delete marker's `type=...` (a raw scan's markers, as HBase shows them).
fn value_or_type(cell: &Cell) -> String {
    if cell.cell_type.is_delete() {
        format!("type={:?}", cell.cell_type)
    } else {
        format!("value={}", to_string_binary(&cell.value))
    }
}

/// One cell of a get: ` cf:q   timestamp=..., value=v`.
pub fn get_cell(cell: &Cell) -> String {
    line(
        &column_name(cell),
        &format!(
            "timestamp={}, value={}",
            format_timestamp(cell.timestamp),
            to_string_binary(&cell.value)
        ),
    )
}

/// `N row(s)`.
pub fn rows(n: u64) -> String {
    format!("{n} row(s)")
}

/// `Took 0.0123 seconds`.
pub fn took(elapsed: Duration) -> String {
    format!("Took {:.4} seconds", elapsed.as_secs_f64())
}

/// A family as HBase's `describe` prints it.
pub fn family_description(f: &FamilySchema) -> String {
    let ttl = match f.ttl_secs {
        None => "FOREVER".to_string(),
        Some(s) => format!("{s} SECONDS"),
    };
    let bloom = match f.bloom {
        BloomType::None => "NONE",
        BloomType::Row => "ROW",
        BloomType::RowCol => "ROWCOL",
    };
    // Like HBase's describe, which lists attributes beyond the standard ones under METADATA.
    let metadata = if f.query_cache {
        ", METADATA => {'QUERY_CACHE' => 'true'}"
    } else {
        ""
    };
    format!(
        "{{NAME => '{}', VERSIONS => '{}', MIN_VERSIONS => '{}', KEEP_DELETED_CELLS => '{}', TTL => '{ttl}', \
         COMPRESSION => '{}', BLOOMFILTER => '{bloom}', BLOCKSIZE => '{}', IN_MEMORY => '{}'{metadata}}}",
        f.name,
        f.max_versions,
        f.min_versions,
        if f.keep_deleted_cells { "TRUE" } else { "FALSE" },
        f.compression.to_string().to_uppercase(),
        f.block_size,
        f.in_memory
    )
}

/// A permission as HBase's `user_permission` shows it: `namespace,table,family,qualifier:
/// [Permission: actions=READ,WRITE]`.
pub fn permission(p: &cellar_client::Permission) -> String {
    let scope = p.scope.clone().unwrap_or_default();
    let (ns, table) = if !scope.table.is_empty() {
        match scope.table.split_once(':') {
            Some((ns, t)) => (ns.to_string(), t.to_string()),
            None => ("default".to_string(), scope.table.clone()),
        }
    } else {
        (scope.namespace.clone(), String::new())
    };
    let bin = |b: &Option<bytes::Bytes>| b.as_deref().map(to_string_binary).unwrap_or_default();
    let actions: Vec<&str> = p
        .actions
        .chars()
        .filter_map(|c| match c {
            'R' => Some("READ"),
            'W' => Some("WRITE"),
            'X' => Some("EXEC"),
            'C' => Some("CREATE"),
            'A' => Some("ADMIN"),
            _ => None,
        })
        .collect();
    format!(
        "{ns},{table},{},{}: [Permission: actions={}]",
        bin(&scope.family),
        bin(&scope.qualifier),
        actions.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use cellar_model::{CellType, Compression};

    #[test]
    fn binary_escaping_matches_hbase() {
        assert_eq!(to_string_binary(b"row-1_A z"), "row-1_A z");
        assert_eq!(to_string_binary(b"\x00\xff"), "\\x00\\xFF");
        assert_eq!(to_string_binary(b"a\\b"), "a\\x5Cb");
        assert_eq!(to_string_binary(b"\n\t\x7f"), "\\x0A\\x09\\x7F");
        let punct = b"`~!@#$%^&*()-_=+[]{}|;:'\",.<>/?";
        assert_eq!(to_string_binary(punct), String::from_utf8_lossy(punct));
        assert_eq!(to_string_binary("é".as_bytes()), "\\xC3\\xA9");
    }

    #[test]
    fn timestamps_are_utc_iso() {
        assert_eq!(format_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_timestamp(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            format_timestamp(1_795_326_000_123),
            "2026-11-22T05:40:00.123Z"
        );
        assert_eq!(
            format_timestamp(253_402_300_799_999),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(format_timestamp(u64::MAX / 2), (u64::MAX / 2).to_string());
    }

    #[test]
    fn cell_lines_align_under_the_header() {
        let cell = Cell {
            row: Bytes::from_static(b"r\x00"),
            family: Bytes::from_static(b"cf"),
            qualifier: Bytes::from_static(b"q"),
            timestamp: 0,
            cell_type: CellType::Put,
            seq_id: 0,
            value: Bytes::from_static(b"v"),
        };
        let h = header("ROW", "COLUMN+CELL");
        let l = scan_cell(&cell);
        assert_eq!(h.find("COLUMN"), l.find("column="));
        assert_eq!(
            l,
            format!(
                " {:<26} column=cf:q, timestamp=1970-01-01T00:00:00.000Z, value=v",
                "r\\x00"
            )
        );
        assert!(get_cell(&cell).starts_with(" cf:q "));
        assert!(get_cell(&cell).ends_with("timestamp=1970-01-01T00:00:00.000Z, value=v"));
        assert_eq!(took(Duration::from_millis(12)), "Took 0.0120 seconds");
        // A raw scan's delete marker shows its type, as HBase's shell does.
        let marker = Cell {
            cell_type: CellType::DeleteColumn,
            value: Bytes::new(),
            ..cell
        };
        assert!(
            scan_cell(&marker).ends_with("timestamp=1970-01-01T00:00:00.000Z, type=DeleteColumn"),
            "{}",
            scan_cell(&marker)
        );
    }

    #[test]
    fn table_attributes_show_when_set() {
        let mut o = cellar_model::TableOptions::default();
        assert_eq!(table_attributes("t", &o), "t");
        o.read_only = true;
        o.max_file_size = Some(1 << 30);
        o.durability = cellar_model::Durability::SyncWal;
        assert_eq!(
            table_attributes("t", &o),
            "t, {TABLE_ATTRIBUTES => {DURABILITY => 'SYNC_WAL', MAX_FILESIZE => '1073741824', READONLY => 'true'}}"
        );
    }

    #[test]
    fn families_print_as_hashes() {
        let mut f = FamilySchema::new("cf");
        assert_eq!(
            family_description(&f),
            "{NAME => 'cf', VERSIONS => '1', MIN_VERSIONS => '0', KEEP_DELETED_CELLS => 'FALSE', \
             TTL => 'FOREVER', COMPRESSION => 'NONE', BLOOMFILTER => 'ROW', BLOCKSIZE => '65536', \
             IN_MEMORY => 'false'}"
        );
        f.ttl_secs = Some(60);
        f.compression = Compression::Zstd;
        f.bloom = BloomType::RowCol;
        let d = family_description(&f);
        assert!(
            d.contains("TTL => '60 SECONDS'") && d.contains("'ZSTD'") && d.contains("'ROWCOL'")
        );
    }
}
