//! The FILE_INFO block: HBase's key → value map of file metadata, and the cell-format flags
//! read from it (`docs/hfile-format.md` §3).

use crate::input::{pb_fields, Bad, Field, Input};
use std::collections::BTreeMap;

/// The map, and what it says about how cells are laid out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileInfo {
    pub entries: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Every cell carries a tags area (`hfile.MAX_TAGS_LEN` present).
    pub includes_tags: bool,
    /// Tags of encoded blocks are dictionary-compressed (`hfile.TAGS_COMPRESSED`).
    pub compress_tags: bool,
    /// Every cell carries its sequence id as a vlong (`KEY_VALUE_VERSION` = 1).
    pub includes_mvcc: bool,
}

impl FileInfo {
    /// Parses a FILE_INFO block's payload: `PBUF`, then a length-delimited `FileInfoProto`.
    pub fn parse(payload: &[u8]) -> Result<FileInfo, Bad> {
        let mut input = Input::new(payload);
        let magic = input.take(4, "file info magic")?;
        if magic != b"PBUF" {
            return Err(
                "the file info is not in the protobuf form HBase 0.96 and later write".into(),
            );
        }
        let len = usize::try_from(input.pbvarint("file info length")?)
            .map_err(|_| "file info length overflows".to_string())?;
        let msg = input.take(len, "file info")?;
        let mut entries = BTreeMap::new();
        pb_fields(msg, "file info", |n, f| {
            if let (1, Field::Bytes(pair)) = (n, f) {
                let (mut k, mut v) = (None, None);
                pb_fields(pair, "file info entry", |n, f| {
                    match (n, f) {
                        (1, Field::Bytes(b)) => k = Some(b.to_vec()),
                        (2, Field::Bytes(b)) => v = Some(b.to_vec()),
                        _ => {}
                    }
                    Ok(())
                })?;
                let k = k.ok_or("a file info entry without a key")?;
                entries.insert(k, v.unwrap_or_default());
            }
            Ok(())
        })?;
        let mut info = FileInfo {
            entries,
            ..FileInfo::default()
        };
        info.includes_tags = info.get(b"hfile.MAX_TAGS_LEN").is_some();
        info.compress_tags = info.includes_tags
            && info
                .get(b"hfile.TAGS_COMPRESSED")
                .is_some_and(|v| v.iter().any(|&b| b != 0));
        info.includes_mvcc = info.int(b"KEY_VALUE_VERSION") == Some(1);
        Ok(info)
    }

    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.entries.get(key).map(Vec::as_slice)
    }

    /// A 4-byte big-endian int value.
    pub fn int(&self, key: &[u8]) -> Option<i32> {
        let v: [u8; 4] = self.get(key)?.try_into().ok()?;
        Some(i32::from_be_bytes(v))
    }

    /// An 8-byte big-endian long value.
    pub fn long(&self, key: &[u8]) -> Option<i64> {
        let v: [u8; 8] = self.get(key)?.try_into().ok()?;
        Some(i64::from_be_bytes(v))
    }

    /// A string value.
    pub fn string(&self, key: &[u8]) -> Option<String> {
        self.get(key)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}
