//! HBase's names for tables and regions, and the order of `hbase:meta`'s rows.
//!
//! The Java client recomputes a region's name from its RegionInfo (table, start key, region
//! id, with an MD5 "encoded name" suffix) and sends that name back in every data call, so
//! Cellar must derive region names exactly as HBase does: `<table>,<start key>,<region id>`
//! where `<table>` omits the `default` namespace and the id is in decimal, then
//! `.<md5 hex of those bytes>.`. Meta alone keeps the old format, `hbase:meta,,1`, whose encoded
//! name is a Jenkins hash, `1588230740`.

use super::{HbaseError, HbaseService};
use crate::names as catalog_names;
use bytes::{BufMut, Bytes, BytesMut};
use cellar_proto::hbase;
use std::cmp::Ordering;

/// Meta's region name, as HBase 2 clients know it (old format, no encoded suffix).
pub(crate) const META_REGION_NAME: &[u8] = b"hbase:meta,,1";
/// Meta's encoded region name (the Jenkins hash HBase computes for `hbase:meta,,1`).
pub(crate) const META_ENCODED_NAME: &[u8] = catalog_names::META_ENCODED_NAME.as_bytes();
/// Meta's table name as Cellar and HBase spell it.
pub(crate) use catalog_names::META_TABLE;
/// Meta's region id.
pub(crate) const META_REGION_ID: u64 = 1;

/// RegionSpecifierType values.
pub(crate) const REGION_NAME: i32 = 1;
pub(crate) const ENCODED_REGION_NAME: i32 = 2;

/// The separator of a region name's parts.
const DELIMITER: u8 = b',';
/// Opens and closes the encoded suffix of a new-format name.
const ENC_SEPARATOR: u8 = b'.';
const MD5_HEX_LEN: usize = 32;

/// What a region specifier names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegionTarget {
    Meta,
    /// A user region: Cellar's table name (`default:` dropped) and region id.
    User {
        table: String,
        region_id: u64,
    },
}

/// The region a RegionSpecifier names (`kind` is its RegionSpecifierType: 1 REGION_NAME,
/// 2 ENCODED_REGION_NAME). A name that does not parse is a DoNotRetryIOException naming it.
/// An encoded name of a user region needs the server's regions: see [`region_ref`].
pub(crate) fn parse_region(kind: i32, value: &[u8]) -> Result<RegionTarget, HbaseError> {
    match kind {
        REGION_NAME => parsed_names::parse(value),
        ENCODED_REGION_NAME if value == META_ENCODED_NAME => Ok(RegionTarget::Meta),
        ENCODED_REGION_NAME => Err(HbaseError::do_not_retry(format!(
            "encoded region name '{}' cannot be resolved without the server's regions",
            show(value)
        ))),
        other => Err(HbaseError::do_not_retry(format!(
            "unknown region specifier type {other} for region '{}'",
            show(value)
        ))),
    }
}

/// A region as a request names it, parsed as far as can be without the server: an encoded
/// name of a user region stays a name until [`RegionRef::resolve`] looks it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegionRef {
    Target(RegionTarget),
    Encoded(Bytes),
}

/// [`parse_region`], keeping encoded names of user regions for [`RegionRef::resolve`].
pub(crate) fn region_ref(kind: i32, value: &Bytes) -> Result<RegionRef, HbaseError> {
    if kind != ENCODED_REGION_NAME || value == META_ENCODED_NAME {
        return parse_region(kind, value).map(RegionRef::Target);
    }
    Ok(RegionRef::Encoded(value.clone()))
}

impl RegionRef {
    /// The region, an encoded name resolved against the regions `svc` serves; one matching
    /// none is a NotServingRegionException (the client locates the region again).
    pub(crate) fn resolve(self, svc: &HbaseService) -> Result<RegionTarget, HbaseError> {
        let value = match self {
            RegionRef::Target(t) => return Ok(t),
            RegionRef::Encoded(value) => value,
        };
        for (table, route) in svc.rs.router.tables() {
            if table == crate::meta::META_TABLE {
                continue;
            }
            for r in route.regions.values() {
                if encoded_name(&table, &r.info.start_key, r.info.id).as_bytes() == value {
                    return Ok(RegionTarget::User {
                        table,
                        region_id: r.info.id,
                    });
                }
            }
        }
        Err(HbaseError::new(
            super::exceptions::NOT_SERVING_REGION,
            format!("region with encoded name '{}' is not online", show(&value)),
            false,
        ))
    }
}

/// Full names already checked, per network thread. The client sends its region's name in
/// every data call, and checking it costs an MD5 of the name; what a name parses to depends
/// on its bytes alone, so a name checked once needs no second check. Only names that parse
/// are kept, at most [`parsed_names::CAPACITY`] of them (the set starts over when full).
mod parsed_names {
    use super::{parse_full_name, HbaseError, RegionTarget};
    use std::cell::RefCell;
    use std::collections::HashMap;

    pub(super) const CAPACITY: usize = 4096;

    thread_local! {
        static PARSED: RefCell<HashMap<Box<[u8]>, RegionTarget>> = RefCell::new(HashMap::new());
    }

    pub(super) fn parse(value: &[u8]) -> Result<RegionTarget, HbaseError> {
        if let Some(hit) = PARSED.with_borrow(|m| m.get(value).cloned()) {
            return Ok(hit);
        }
        let target = parse_full_name(value)?;
        PARSED.with_borrow_mut(|m| {
            if m.len() >= CAPACITY {
                m.clear();
            }
            m.insert(value.into(), target.clone());
        });
        Ok(target)
    }

    #[cfg(test)]
    pub(super) fn held() -> usize {
        PARSED.with_borrow(|m| m.len())
    }
}

/// Splits a full region name into table, start key and id, and checks the encoded suffix.
fn parse_full_name(value: &[u8]) -> Result<RegionTarget, HbaseError> {
    let bad = |why: &str| {
        HbaseError::do_not_retry(format!("invalid region name '{}': {why}", show(value)))
    };
    if value == META_REGION_NAME {
        return Ok(RegionTarget::Meta);
    }
    let first = value
        .iter()
        .position(|&b| b == DELIMITER)
        .ok_or_else(|| bad("no ',' after the table name"))?;
    let table_bytes = value.get(..first).unwrap_or_default();
    if table_bytes.is_empty() {
        return Err(bad("the table name is empty"));
    }
    let suffix_start = value.len().checked_sub(MD5_HEX_LEN + 2).filter(|&i| i > 0);
    let has_suffix = suffix_start.is_some_and(|i| {
        value.last() == Some(&ENC_SEPARATOR) && value.get(i) == Some(&ENC_SEPARATOR)
    });
    let end = match suffix_start {
        Some(i) if has_suffix => i,
        _ => value.len(),
    };
    // The first ',' may lie inside what looked like the encoded suffix.
    let last = value
        .get(first + 1..end)
        .unwrap_or_default()
        .iter()
        .rposition(|&b| b == DELIMITER)
        .map(|i| i + first + 1)
        .ok_or_else(|| bad("no ',' before the region id"))?;
    let start_key = value.get(first + 1..last).unwrap_or_default();
    let id_bytes = value.get(last + 1..end).unwrap_or_default();
    let id_text = std::str::from_utf8(id_bytes).map_err(|_| bad("the region id is not text"))?;
    if id_text.contains('_') {
        return Err(bad("region replicas are not served by Cellar"));
    }
    let table_text =
        std::str::from_utf8(table_bytes).map_err(|_| bad("the table name is not UTF-8"))?;
    let table = catalog_names::canonical(table_text).map_err(|e| bad(&e.to_string()))?;
    if table == META_TABLE {
        // Meta's only region is `hbase:meta,,1` (also accepted with an encoded suffix).
        return if start_key.is_empty() && id_text == "1" {
            Ok(RegionTarget::Meta)
        } else {
            Err(bad("hbase:meta has one region, 'hbase:meta,,1'"))
        };
    }
    if !has_suffix {
        return Err(bad("user regions have an encoded name suffix '.<md5>.'"));
    }
    let region_id: u64 = id_text
        .parse()
        .map_err(|_| bad("the region id is not a number"))?;
    // A name Cellar would not have produced (wrong digest) names no region.
    if region_name(&table, start_key, region_id) != value {
        return Err(bad(
            "its encoded name does not match its table, start key and id",
        ));
    }
    Ok(RegionTarget::User { table, region_id })
}

/// A region's full name: `<table>,<start key>,<region id>.<md5 hex of the preceding part>.`
/// (`<table>` without the `default:` namespace, as Cellar's canonical names are).
pub(crate) fn region_name(table: &str, start_key: &[u8], region_id: u64) -> Bytes {
    if table == META_TABLE {
        return Bytes::from_static(META_REGION_NAME);
    }
    let encoded = catalog_names::encoded_region_name(table, start_key, region_id);
    let row = catalog_names::region_row(table, start_key, region_id);
    let mut b = BytesMut::with_capacity(row.len() + encoded.len() + 2);
    b.put_slice(&row);
    b.put_u8(ENC_SEPARATOR);
    b.put_slice(encoded.as_bytes());
    b.put_u8(ENC_SEPARATOR);
    b.freeze()
}

/// A region's encoded name: the MD5 hex of `<table>,<start key>,<region id>`.
pub(crate) fn encoded_name(table: &str, start_key: &[u8], region_id: u64) -> String {
    catalog_names::encoded_region_name(table, start_key, region_id)
}

/// HBase's `TableName` for a Cellar table name (`t` is `default:t`).
pub(crate) fn table_to_pb(table: &str) -> hbase::TableName {
    let (ns, q) = catalog_names::split(table);
    hbase::TableName {
        namespace: Bytes::copy_from_slice(ns.as_bytes()),
        qualifier: Bytes::copy_from_slice(q.as_bytes()),
    }
}

/// Cellar's canonical table name for HBase's `TableName`, checked against the naming rules.
pub(crate) fn table_from_pb(t: &hbase::TableName) -> Result<String, HbaseError> {
    let text = |b: &[u8], what: &str| {
        std::str::from_utf8(b).map(str::to_owned).map_err(|_| {
            HbaseError::do_not_retry(format!("table {what} '{}' is not UTF-8", show(b)))
        })
    };
    let ns = text(&t.namespace, "namespace")?;
    let q = text(&t.qualifier, "qualifier")?;
    let full = if ns.is_empty() {
        q
    } else {
        format!("{ns}:{q}")
    };
    catalog_names::canonical(&full).map_err(|e| HbaseError::do_not_retry(e.to_string()))
}

/// Orders meta rows as HBase's meta comparator does: by table (up to the first ','), then by
/// start key (up to the last ','), then by the rest (region id and encoded suffix), each part
/// bytewise. A bare table name (a table-state row) sorts before that table's regions.
#[allow(
    clippy::indexing_slicing,
    reason = "every bound is a position found in the same row, one past it, or its length"
)]
pub(crate) fn meta_compare(a: &[u8], b: &[u8]) -> Ordering {
    let first = |r: &[u8]| r.iter().position(|&x| x == DELIMITER);
    let (fa, fb) = (first(a), first(b));
    let table_a = &a[..fa.unwrap_or(a.len())];
    let table_b = &b[..fb.unwrap_or(b.len())];
    match table_a.cmp(table_b) {
        Ordering::Equal => {}
        other => return other,
    }
    let (fa, fb) = match (fa, fb) {
        (None, None) => return Ordering::Equal,
        (None, Some(_)) => return Ordering::Less,
        (Some(_), None) => return Ordering::Greater,
        (Some(x), Some(y)) => (x + 1, y + 1),
    };
    // The start key runs to the last ',' (start keys may hold ',' themselves).
    let last = |r: &[u8], from: usize| {
        r[from..]
            .iter()
            .rposition(|&x| x == DELIMITER)
            .map(|i| i + from)
    };
    let (la, lb) = (last(a, fa), last(b, fb));
    let mid_a = &a[fa..la.unwrap_or(a.len())];
    let mid_b = &b[fb..lb.unwrap_or(b.len())];
    match mid_a.cmp(mid_b) {
        Ordering::Equal => {}
        other => return other,
    }
    // Without a second ',' HBase compares from the row's start (its index -1 + 1 = 0).
    let tail_a = &a[la.map_or(0, |i| i + 1)..];
    let tail_b = &b[lb.map_or(0, |i| i + 1)..];
    tail_a.cmp(tail_b)
}

/// Bytes as HBase prints them (`toStringBinary`): printable ASCII as is, the rest `\xNN`.
pub(crate) fn show(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            s.push(c as char);
        } else {
            s.push_str(&format!("\\x{c:02X}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_names_are_hbases() {
        // md5("t1,,1700000000000") = 43ae7364b4a555b93267937f9bc49ec1 (computed independently).
        assert_eq!(
            &region_name("t1", b"", 1_700_000_000_000)[..],
            b"t1,,1700000000000.43ae7364b4a555b93267937f9bc49ec1."
        );
        assert_eq!(
            encoded_name("t1", b"", 1_700_000_000_000),
            "43ae7364b4a555b93267937f9bc49ec1"
        );
        // Start key with ',' and a zero byte; a namespaced table keeps its namespace.
        // md5("ns:t,a\x00,b,1700000000001") = 317dd7ce179f9069d568ec4a2c525789.
        assert_eq!(
            &region_name("ns:t", b"a\x00,b", 1_700_000_000_001)[..],
            b"ns:t,a\x00,b,1700000000001.317dd7ce179f9069d568ec4a2c525789."
        );
        assert_eq!(&region_name(META_TABLE, b"", 1)[..], META_REGION_NAME);
    }

    #[test]
    fn names_parse_back() {
        for (table, start) in [
            ("t", &b""[..]),
            ("t", b"row,with,commas"),
            ("ns:t", b"\x00\xff,\x01."),
            ("t.x-y", b",,"),
        ] {
            let name = region_name(table, start, 1_712_345_678_901);
            assert_eq!(
                parse_region(REGION_NAME, &name).expect("parses"),
                RegionTarget::User {
                    table: table.into(),
                    region_id: 1_712_345_678_901
                },
                "{}",
                show(&name)
            );
        }
        // The client never writes `default:`; such a name is not one Cellar produced.
        let mut with_default = b"default:".to_vec();
        let name = region_name("t", b"k", 5);
        with_default.extend_from_slice(&name);
        assert!(
            parse_region(REGION_NAME, &with_default).is_err(),
            "digest covers the name as sent"
        );
        assert_eq!(
            parse_region(REGION_NAME, META_REGION_NAME),
            Ok(RegionTarget::Meta)
        );
        assert_eq!(
            parse_region(ENCODED_REGION_NAME, META_ENCODED_NAME),
            Ok(RegionTarget::Meta)
        );
    }

    #[test]
    fn bad_names_are_named() {
        for (bad, why) in [
            (&b"nocomma"[..], "no ','"),
            (b",x,1.", "table name is empty"),
            (b"t,,1", "encoded name suffix"),
            (b"t,,12.0123456789abcdef0123456789abcdef.", "does not match"),
            (b"t,,x1.0123456789abcdef0123456789abcdef.", "not a number"),
            (b"t,,1_0001.0123456789abcdef0123456789abcdef.", "replicas"),
            (
                b"b@d,,1.0123456789abcdef0123456789abcdef.",
                "illegal table name",
            ),
        ] {
            let e = parse_region(REGION_NAME, bad).expect_err(&show(bad));
            assert!(e.do_not_retry);
            assert!(e.message.contains(why), "{}: {}", show(bad), e.message);
        }
        assert!(parse_region(7, b"x").is_err());
        assert!(parse_region(ENCODED_REGION_NAME, b"abc").is_err());
    }

    #[test]
    fn checked_names_are_remembered_but_forgeries_still_refused() {
        let name = region_name("t", b"k", 7);
        let want = RegionTarget::User {
            table: "t".into(),
            region_id: 7,
        };
        assert_eq!(parse_region(REGION_NAME, &name), Ok(want.clone()));
        assert_eq!(
            parse_region(REGION_NAME, &name),
            Ok(want),
            "second, remembered"
        );
        // Same table, key and id, one digest digit changed: never matches the remembered name.
        let mut forged = name.to_vec();
        let digit = forged.len() - 2;
        forged[digit] = if forged[digit] == b'0' { b'1' } else { b'0' };
        let e = parse_region(REGION_NAME, &forged).expect_err("forged digest");
        assert!(e.message.contains("does not match"), "{}", e.message);
        // Bounded: many distinct names never hold more than the capacity.
        for id in 0..(parsed_names::CAPACITY as u64 + 10) {
            let n = region_name("t", b"k", 1000 + id);
            assert!(parse_region(REGION_NAME, &n).is_ok());
            assert!(parsed_names::held() <= parsed_names::CAPACITY);
        }
    }

    #[test]
    fn meta_order() {
        use Ordering::*;
        // Start key "a" sorts before "a\0" although ',' (0x2c) > 0x00 bytewise.
        let a = region_name("t", b"a", 1);
        let a0 = region_name("t", b"a\x00", 1);
        assert_eq!(meta_compare(&a, &a0), Less);
        assert_eq!(a[..].cmp(&a0[..]), Greater, "plain byte order differs");
        // The table row sorts before its regions; tables by name ("t" < "t2" < "t,..."? no:
        // the table part is compared alone).
        assert_eq!(meta_compare(b"t", &region_name("t", b"", 1)), Less);
        assert_eq!(meta_compare(&region_name("t", b"zz", 1), b"t2"), Less);
        assert_eq!(
            meta_compare(&region_name("t2", b"", 1), &region_name("t", b"zz", 9)),
            Greater
        );
        // The locate scan's start row sorts after every region starting at or below the row.
        let probe = b"t,m,99999999999999";
        assert_eq!(
            meta_compare(&region_name("t", b"m", 1_700_000_000_000), probe),
            Less
        );
        assert_eq!(meta_compare(&region_name("t", b"m\x00", 1), probe), Greater);
        assert_eq!(meta_compare(&region_name("t", b"", 1), b"t,,"), Greater);
        assert_eq!(meta_compare(b"t", b"t,,"), Less);
        // Start keys holding ',' are compared whole.
        assert_eq!(
            meta_compare(&region_name("t", b"a,b", 1), &region_name("t", b"a,c", 1)),
            Less
        );
        assert_eq!(meta_compare(&a, &a), Equal);
    }

    #[test]
    fn table_names_convert() {
        let pb = table_to_pb("t1");
        assert_eq!(&pb.namespace[..], b"default");
        assert_eq!(&pb.qualifier[..], b"t1");
        assert_eq!(table_from_pb(&pb).expect("back"), "t1");
        assert_eq!(table_from_pb(&table_to_pb("ns:x")).expect("ns"), "ns:x");
        assert_eq!(
            table_from_pb(&table_to_pb(META_TABLE)).expect("meta"),
            META_TABLE
        );
        let bad = hbase::TableName {
            namespace: Bytes::from_static(b"default"),
            qualifier: Bytes::from_static(b"a b"),
        };
        assert!(table_from_pb(&bad)
            .expect_err("space")
            .message
            .contains("a b"));
    }

    /// Found by the `hbase_request` fuzz target: a name whose first ',' lies inside what
    /// looks like its `.<md5>.` suffix made the parser slice backwards and panic.
    #[test]
    fn a_comma_inside_the_encoded_suffix_is_a_bad_name() {
        let value =
            b"t1\x06\x00\x00\x00\x00\x00\x00\x800000000.43ae7364,\x03\x00\x0055bp90+000009bc49ec1.";
        let e = parse_region(REGION_NAME, value).expect_err("not a region name");
        assert!(
            e.message.contains("no ',' before the region id"),
            "{}",
            e.message
        );
    }
}
