//! Table descriptors between HBase's wire form (`TableSchema` with family attributes as
//! string key/value pairs, keys as `ColumnFamilyDescriptorBuilder` spells them) and Cellar's
//! `TableSchema`.
//!
//! The Java client sends every family attribute, defaults included (`VERSIONS=1`,
//! `TTL=2147483647` for "forever", `BLOOMFILTER=ROW`, `COMPRESSION=NONE`, `BLOCKSIZE=65536`,
//! ...). Table attributes `MAX_FILESIZE`, `DURABILITY` and `READONLY` are kept and honoured
//! (`TableOptions`), as is `QUERY_CACHE`. Attributes Cellar has no notion of (block cache,
//! replication scope, other table attributes) are ignored; values Cellar cannot honour (a
//! compression codec it lacks, a data block encoding, `KEEP_DELETED_CELLS=TTL`) are refused
//! with a DoNotRetryIOException naming the family, the attribute and the value.

use super::names;
use super::HbaseError;
use bytes::Bytes;
use cellar_model::{Durability, FamilySchema, TableOptions, TableSchema};
use cellar_proto::hbase;

pub(crate) const VERSIONS: &str = "VERSIONS";
pub(crate) const MIN_VERSIONS: &str = "MIN_VERSIONS";
pub(crate) const TTL: &str = "TTL";
pub(crate) const BLOOMFILTER: &str = "BLOOMFILTER";
pub(crate) const COMPRESSION: &str = "COMPRESSION";
pub(crate) const BLOCKSIZE: &str = "BLOCKSIZE";
pub(crate) const IN_MEMORY: &str = "IN_MEMORY";
pub(crate) const KEEP_DELETED_CELLS: &str = "KEEP_DELETED_CELLS";
pub(crate) const DATA_BLOCK_ENCODING: &str = "DATA_BLOCK_ENCODING";
/// Table attributes.
pub(crate) const MAX_FILESIZE: &str = "MAX_FILESIZE";
pub(crate) const DURABILITY: &str = "DURABILITY";
pub(crate) const READONLY: &str = "READONLY";
/// Cellar's query cache for a family, or for every family when a table attribute
/// (`setValue("QUERY_CACHE", "true")` on either descriptor builder, or in a family's
/// configuration).
pub(crate) const QUERY_CACHE: &str = "QUERY_CACHE";
/// HBase's TTL meaning "never expires" (`HConstants.FOREVER`, Integer.MAX_VALUE seconds).
pub(crate) const FOREVER: i64 = i32::MAX as i64;

/// Cellar's schema for an HBase table descriptor.
pub(crate) fn table_from_pb(pb: &hbase::TableSchema) -> Result<TableSchema, HbaseError> {
    let name = pb
        .table_name
        .as_ref()
        .ok_or_else(|| HbaseError::do_not_retry("table descriptor without a table name"))?;
    let name = names::table_from_pb(name)?;
    let mut families = pb
        .column_families
        .iter()
        .map(|f| family_from_pb(&name, f))
        .collect::<Result<Vec<_>, _>>()?;
    if pb
        .attributes
        .iter()
        .any(|a| a.first.as_ref() == QUERY_CACHE.as_bytes() && is_true(&a.second))
    {
        for f in &mut families {
            f.query_cache = true;
        }
    }
    let options = table_options(&name, &pb.attributes)?;
    let mut schema = TableSchema::new(name, families);
    schema.options = options;
    schema
        .validate()
        .map_err(|e| HbaseError::do_not_retry(format!("table '{}': {e}", schema.name)))?;
    Ok(schema)
}

/// The table attributes Cellar keeps: `MAX_FILESIZE`, `DURABILITY`, `READONLY`.
fn table_options(
    table: &str,
    attributes: &[hbase::BytesBytesPair],
) -> Result<TableOptions, HbaseError> {
    let mut o = TableOptions::default();
    for attr in attributes {
        let key = String::from_utf8_lossy(&attr.first);
        let value = String::from_utf8_lossy(&attr.second);
        let value = value.trim();
        let bad = |why: &str| {
            HbaseError::do_not_retry(format!("table '{table}': {key} => '{value}' {why}"))
        };
        match key.as_ref() {
            MAX_FILESIZE => {
                o.max_file_size = match value.parse::<i64>() {
                    // HBase's "not set" (-1) and its default.
                    Ok(n) if n <= 0 => None,
                    Ok(n) => Some(n as u64),
                    Err(_) => return Err(bad("is not a number of bytes")),
                }
            }
            DURABILITY => {
                o.durability = value.parse().map_err(|_| {
                    bad("is not USE_DEFAULT, SKIP_WAL, ASYNC_WAL, SYNC_WAL or FSYNC_WAL")
                })?
            }
            READONLY => o.read_only = value.eq_ignore_ascii_case("true"),
            _ => {}
        }
    }
    Ok(o)
}

/// Cellar's options for one HBase family descriptor of `table`.
pub(crate) fn family_from_pb(
    table: &str,
    pb: &hbase::ColumnFamilySchema,
) -> Result<FamilySchema, HbaseError> {
    let name = std::str::from_utf8(&pb.name).map_err(|_| {
        HbaseError::do_not_retry(format!(
            "table '{table}': family name '{}' is not UTF-8",
            names::show(&pb.name)
        ))
    })?;
    let mut f = FamilySchema::new(name);
    f.query_cache = pb
        .configuration
        .iter()
        .any(|c| c.name == QUERY_CACHE && is_true(c.value.as_bytes()));
    let mut min_versions = 0u32;
    for attr in &pb.attributes {
        let key = String::from_utf8_lossy(&attr.first);
        let value = String::from_utf8_lossy(&attr.second);
        let value = value.trim();
        let bad = |why: &str| {
            HbaseError::do_not_retry(format!(
                "table '{table}', family '{name}': {key} => '{value}' {why}"
            ))
        };
        let number = |what: &str| -> Result<i64, HbaseError> {
            value
                .parse::<i64>()
                .map_err(|_| bad(&format!("is not {what}")))
        };
        match key.as_ref() {
            VERSIONS => {
                f.max_versions = u32::try_from(number("a number")?)
                    .ok()
                    .filter(|v| *v > 0)
                    .ok_or_else(|| bad("must be a positive number"))?;
            }
            MIN_VERSIONS => {
                min_versions =
                    u32::try_from(number("a number")?).map_err(|_| bad("must not be negative"))?;
            }
            TTL => {
                let secs = number("a number of seconds")?;
                f.ttl_secs = match secs {
                    s if s >= FOREVER => None,
                    s if s > 0 => Some(s as u64),
                    _ => return Err(bad("must be positive")),
                };
            }
            BLOOMFILTER => {
                f.bloom = value
                    .parse()
                    .map_err(|_| bad("is not supported by Cellar (NONE, ROW or ROWCOL)"))?;
            }
            COMPRESSION => {
                f.compression = value
                    .parse()
                    .map_err(|_| bad("is not supported by Cellar (NONE, SNAPPY, LZ4 or ZSTD)"))?;
            }
            BLOCKSIZE => {
                f.block_size = u32::try_from(number("a number of bytes")?)
                    .map_err(|_| bad("is out of range"))?;
            }
            IN_MEMORY => f.in_memory = value.eq_ignore_ascii_case("true"),
            QUERY_CACHE => f.query_cache = value.eq_ignore_ascii_case("true"),
            KEEP_DELETED_CELLS => {
                f.keep_deleted_cells = match value.to_ascii_uppercase().as_str() {
                    "FALSE" => false,
                    "TRUE" => true,
                    "TTL" => {
                        return Err(bad(
                            "is not supported by Cellar (TRUE or FALSE; TRUE keeps deleted cells up to the family's TTL too)",
                        ))
                    }
                    _ => return Err(bad("is not TRUE or FALSE")),
                };
            }
            DATA_BLOCK_ENCODING if !value.eq_ignore_ascii_case("NONE") => {
                return Err(bad(
                    "is not supported by Cellar (only NONE): its blocks are compressed whole, use COMPRESSION => 'LZ4' or 'ZSTD'",
                ));
            }
            _ => {}
        }
    }
    // HBase applies MIN_VERSIONS only together with a TTL; Cellar refuses the pair otherwise.
    if f.ttl_secs.is_some() {
        f.min_versions = min_versions;
    }
    f.validate()
        .map_err(|e| HbaseError::do_not_retry(format!("table '{table}': {e}")))?;
    Ok(f)
}

fn is_true(v: &[u8]) -> bool {
    std::str::from_utf8(v).is_ok_and(|s| s.trim().eq_ignore_ascii_case("true"))
}

fn attr(key: &str, value: impl ToString) -> hbase::BytesBytesPair {
    hbase::BytesBytesPair {
        first: Bytes::copy_from_slice(key.as_bytes()),
        second: Bytes::from(value.to_string().into_bytes()),
    }
}

/// HBase's descriptor of one Cellar family (the attributes Cellar knows).
pub(crate) fn family_to_pb(f: &FamilySchema) -> hbase::ColumnFamilySchema {
    // HBase's names are Cellar's, upper case.
    let bloom = f.bloom.to_string().to_ascii_uppercase();
    let compression = f.compression.to_string().to_ascii_uppercase();
    let ttl = f.ttl_secs.map_or(FOREVER, |s| {
        i64::try_from(s).unwrap_or(FOREVER).min(FOREVER)
    });
    hbase::ColumnFamilySchema {
        name: Bytes::copy_from_slice(f.name.as_bytes()),
        attributes: vec![
            attr(BLOCKSIZE, f.block_size),
            attr(BLOOMFILTER, bloom),
            attr(COMPRESSION, compression),
            attr(IN_MEMORY, f.in_memory),
            attr(
                KEEP_DELETED_CELLS,
                if f.keep_deleted_cells {
                    "TRUE"
                } else {
                    "FALSE"
                },
            ),
            attr(MIN_VERSIONS, f.min_versions),
            attr(TTL, ttl),
            attr(VERSIONS, f.max_versions),
        ]
        .into_iter()
        .chain(f.query_cache.then(|| attr(QUERY_CACHE, "true")))
        .collect(),
        configuration: Vec::new(),
    }
}

/// HBase's descriptor of a Cellar table: its attributes where they are not the defaults
/// (HBase's `describe` shows them as `TABLE_ATTRIBUTES`).
pub(crate) fn table_to_pb(s: &TableSchema) -> hbase::TableSchema {
    let o = &s.options;
    let durability = (o.durability != Durability::UseDefault).then(|| o.durability.to_string());
    let attributes = o
        .max_file_size
        .map(|n| attr(MAX_FILESIZE, n))
        .into_iter()
        .chain(durability.map(|d| attr(DURABILITY, d)))
        .chain(o.read_only.then(|| attr(READONLY, "true")))
        .collect();
    hbase::TableSchema {
        table_name: Some(names::table_to_pb(&s.name)),
        attributes,
        column_families: s.families.iter().map(family_to_pb).collect(),
        configuration: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::schema::{BloomType, Compression};

    fn family(name: &str, attrs: &[(&str, &str)]) -> hbase::ColumnFamilySchema {
        hbase::ColumnFamilySchema {
            name: Bytes::copy_from_slice(name.as_bytes()),
            attributes: attrs.iter().map(|(k, v)| attr(k, v)).collect(),
            configuration: Vec::new(),
        }
    }

    fn table(name: &str, families: Vec<hbase::ColumnFamilySchema>) -> hbase::TableSchema {
        hbase::TableSchema {
            table_name: Some(names::table_to_pb(name)),
            attributes: vec![attr("IS_META", "false")],
            column_families: families,
            configuration: Vec::new(),
        }
    }

    #[test]
    fn java_client_defaults_and_settings_convert() {
        let pb = table(
            "t",
            vec![
                // What `ColumnFamilyDescriptorBuilder.of("cf")` sends.
                family(
                    "cf",
                    &[
                        ("BLOOMFILTER", "ROW"),
                        ("VERSIONS", "1"),
                        ("MIN_VERSIONS", "0"),
                        ("TTL", "2147483647"),
                        ("COMPRESSION", "NONE"),
                        ("BLOCKSIZE", "65536"),
                        ("IN_MEMORY", "false"),
                        ("BLOCKCACHE", "true"),
                        ("KEEP_DELETED_CELLS", "FALSE"),
                        ("DATA_BLOCK_ENCODING", "NONE"),
                        ("REPLICATION_SCOPE", "0"),
                    ],
                ),
                family(
                    "hot",
                    &[
                        ("VERSIONS", "5"),
                        ("MIN_VERSIONS", "2"),
                        ("TTL", "86400"),
                        ("BLOOMFILTER", "ROWCOL"),
                        ("COMPRESSION", "ZSTD"),
                        ("BLOCKSIZE", "16384"),
                        ("IN_MEMORY", "true"),
                    ],
                ),
            ],
        );
        let s = table_from_pb(&pb).expect("converts");
        assert_eq!(s.name, "t");
        assert_eq!(s.families[0], FamilySchema::new("cf"));
        let hot = &s.families[1];
        assert_eq!(
            (hot.max_versions, hot.min_versions, hot.ttl_secs),
            (5, 2, Some(86_400))
        );
        assert_eq!(
            (hot.bloom, hot.compression),
            (BloomType::RowCol, Compression::Zstd)
        );
        assert_eq!((hot.block_size, hot.in_memory), (16_384, true));
        // And back: the same schema again.
        assert_eq!(table_from_pb(&table_to_pb(&s)).expect("round trip"), s);
        let cf = family_to_pb(&s.families[0]);
        let get = |k: &str| {
            cf.attributes
                .iter()
                .find(|a| &a.first[..] == k.as_bytes())
                .map(|a| String::from_utf8_lossy(&a.second).into_owned())
        };
        assert_eq!(get("TTL").as_deref(), Some("2147483647"));
        assert_eq!(get("VERSIONS").as_deref(), Some("1"));
        assert_eq!(get("BLOOMFILTER").as_deref(), Some("ROW"));
    }

    #[test]
    fn min_versions_without_ttl_is_dropped_as_hbase_ignores_it() {
        let pb = table("t", vec![family("cf", &[("MIN_VERSIONS", "1")])]);
        assert_eq!(table_from_pb(&pb).expect("ok").families[0].min_versions, 0);
    }

    #[test]
    fn unsupported_values_are_named() {
        for (k, v, want) in [
            ("COMPRESSION", "GZ", "COMPRESSION => 'GZ'"),
            ("BLOOMFILTER", "ROWPREFIX_FIXED_LENGTH", "BLOOMFILTER"),
            ("KEEP_DELETED_CELLS", "TTL", "KEEP_DELETED_CELLS"),
            (
                "DATA_BLOCK_ENCODING",
                "FAST_DIFF",
                "DATA_BLOCK_ENCODING => 'FAST_DIFF'",
            ),
            ("VERSIONS", "0", "VERSIONS => '0'"),
            ("TTL", "soon", "TTL => 'soon'"),
            ("BLOCKSIZE", "10", "block_size"),
        ] {
            let e = table_from_pb(&table("t", vec![family("cf", &[(k, v)])]))
                .expect_err(&format!("{k}={v}"));
            assert!(e.do_not_retry);
            assert_eq!(e.class, super::super::exceptions::DO_NOT_RETRY);
            assert!(e.message.contains(want), "{k}={v}: {}", e.message);
            assert!(e.message.contains("'cf'"), "{k}={v}: {}", e.message);
        }
        let none = table("t", vec![]);
        assert!(table_from_pb(&none)
            .expect_err("no family")
            .message
            .contains("no column family"));
    }
}
