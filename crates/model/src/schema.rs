//! Table and column-family schemas: the options HBase users set per family.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// Per-block compression of store files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    None,
    Lz4,
    Zstd,
    Snappy,
}

impl Compression {
    /// The code stored in block trailers and file metadata.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
            Compression::Snappy => 3,
        }
    }

    pub fn from_code(code: u8) -> Option<Compression> {
        Some(match code {
            0 => Compression::None,
            1 => Compression::Lz4,
            2 => Compression::Zstd,
            3 => Compression::Snappy,
            _ => return None,
        })
    }
}

impl FromStr for Compression {
    type Err = Error;
    fn from_str(s: &str) -> Result<Compression> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            "snappy" => Ok(Compression::Snappy),
            other => Err(Error::InvalidSchema(format!(
                "unknown compression '{other}' (expected none, lz4, zstd or snappy)"
            ))),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
            Compression::Snappy => "snappy",
        })
    }
}

/// What a family's bloom filter is keyed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BloomType {
    None,
    /// Answers "may this file hold this row?" (HBase's default).
    #[default]
    Row,
    /// Answers "may this file hold this (row, qualifier)?".
    RowCol,
}

impl BloomType {
    pub fn code(self) -> u8 {
        match self {
            BloomType::None => 0,
            BloomType::Row => 1,
            BloomType::RowCol => 2,
        }
    }

    pub fn from_code(code: u8) -> Option<BloomType> {
        Some(match code {
            0 => BloomType::None,
            1 => BloomType::Row,
            2 => BloomType::RowCol,
            _ => return None,
        })
    }
}

impl FromStr for BloomType {
    type Err = Error;
    fn from_str(s: &str) -> Result<BloomType> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(BloomType::None),
            "row" => Ok(BloomType::Row),
            "rowcol" => Ok(BloomType::RowCol),
            other => Err(Error::InvalidSchema(format!(
                "unknown bloom type '{other}' (expected none, row or rowcol)"
            ))),
        }
    }
}

impl fmt::Display for BloomType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BloomType::None => "none",
            BloomType::Row => "row",
            BloomType::RowCol => "rowcol",
        })
    }
}

/// The options of one column family. Defaults are HBase 2's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilySchema {
    pub name: String,
    /// Versions kept per column; older ones are hidden on read and dropped by major compaction.
    pub max_versions: u32,
    /// Versions kept even when older than the TTL.
    pub min_versions: u32,
    /// Cells older than this many seconds expire; `None` keeps them forever.
    pub ttl_secs: Option<u64>,
    pub compression: Compression,
    pub bloom: BloomType,
    pub bloom_bits_per_key: u32,
    /// Target uncompressed size of a data block.
    pub block_size: u32,
    /// Blocks of this family get the block cache's in-memory priority.
    pub in_memory: bool,
    /// Gets reading only query-cached families are answered from the server's query cache
    /// when they can be (`QUERY_CACHE => true`; Cellar's, after Hypertable's).
    pub query_cache: bool,
    /// Deleted cells are kept (HBase's `KEEP_DELETED_CELLS`): compactions keep delete markers
    /// and the puts they mask (up to `max_versions` and the TTL), and a read whose time range
    /// ends at or before a marker's timestamp sees the cells as they were (time travel).
    pub keep_deleted_cells: bool,
}

impl FamilySchema {
    pub fn new(name: impl Into<String>) -> FamilySchema {
        FamilySchema {
            name: name.into(),
            max_versions: 1,
            min_versions: 0,
            ttl_secs: None,
            compression: Compression::None,
            bloom: BloomType::Row,
            bloom_bits_per_key: 10,
            block_size: 64 * 1024,
            in_memory: false,
            query_cache: false,
            keep_deleted_cells: false,
        }
    }

    /// Checks every option, naming the first that is out of range.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| {
            Err(Error::InvalidSchema(format!(
                "family '{}': {msg}",
                self.name
            )))
        };
        if self.name.is_empty() {
            return Err(Error::InvalidSchema("family name is empty".into()));
        }
        if self.name.len() > 255
            || self.name.starts_with('.')
            || self
                .name
                .bytes()
                .any(|b| b == b':' || b == b'/' || b.is_ascii_control())
        {
            return bad(
                "name must be 1-255 printable bytes without ':' or '/', not starting with '.'"
                    .into(),
            );
        }
        if self.name == "recovered.edits" {
            // A region directory's subdirectory for edits split from dead servers' logs.
            return bad("the name is reserved for a region's recovered edits".into());
        }
        if self.max_versions == 0 {
            return bad("max_versions must be at least 1".into());
        }
        if self.min_versions > self.max_versions {
            return bad(format!(
                "min_versions ({}) exceeds max_versions ({})",
                self.min_versions, self.max_versions
            ));
        }
        if self.ttl_secs == Some(0) {
            return bad("ttl must be positive (omit it to keep cells forever)".into());
        }
        if self.min_versions > 0 && self.ttl_secs.is_none() {
            return bad("min_versions only has a meaning together with a ttl".into());
        }
        if !(1024..=16 * 1024 * 1024).contains(&self.block_size) {
            return bad(format!(
                "block_size {} is outside 1 KiB..16 MiB",
                self.block_size
            ));
        }
        if self.bloom != BloomType::None && !(1..=64).contains(&self.bloom_bits_per_key) {
            return bad(format!(
                "bloom_bits_per_key {} is outside 1..64",
                self.bloom_bits_per_key
            ));
        }
        Ok(())
    }
}

/// A table's name, families and table-wide options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    pub name: String,
    pub families: Vec<FamilySchema>,
    pub options: TableOptions,
}

/// What a table sets for all its families (HBase's table descriptor attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    /// A region of this table splits once its store files pass this many bytes (HBase's
    /// `MAX_FILESIZE`); `None`: the server's split sizes (`split.*`).
    pub max_file_size: Option<u64>,
    /// The durability of mutations that ask for the default (HBase's `DURABILITY`);
    /// `UseDefault`: `SyncWal`.
    pub durability: crate::mutation::Durability,
    /// Every write is refused (HBase's `READONLY`).
    pub read_only: bool,
}

impl TableSchema {
    pub fn new(name: impl Into<String>, families: Vec<FamilySchema>) -> TableSchema {
        TableSchema {
            name: name.into(),
            families,
            options: TableOptions::default(),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::InvalidSchema("table name is empty".into()));
        }
        if self.options.max_file_size == Some(0) {
            return Err(Error::InvalidSchema(format!(
                "table '{}': MAX_FILESIZE must be positive",
                self.name
            )));
        }
        if self.families.is_empty() {
            return Err(Error::InvalidSchema(format!(
                "table '{}' has no column family",
                self.name
            )));
        }
        for (i, f) in self.families.iter().enumerate() {
            f.validate()?;
            if self.families[..i].iter().any(|g| g.name == f.name) {
                return Err(Error::InvalidSchema(format!(
                    "family '{}' is listed twice",
                    f.name
                )));
            }
        }
        Ok(())
    }

    pub fn family(&self, name: &[u8]) -> Option<&FamilySchema> {
        self.families.iter().find(|f| f.name.as_bytes() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_options_are_named() {
        FamilySchema::new("cf").validate().expect("defaults valid");
        let mut f = FamilySchema::new("cf");
        f.max_versions = 0;
        let err = f.validate().expect_err("zero versions").to_string();
        assert!(
            err.contains("max_versions") && err.contains("'cf'"),
            "{err}"
        );
        let mut f = FamilySchema::new("cf");
        f.block_size = 10;
        assert!(f
            .validate()
            .expect_err("tiny block")
            .to_string()
            .contains("block_size"));
        assert!("gzip"
            .parse::<Compression>()
            .expect_err("unknown")
            .to_string()
            .contains("gzip"));
        let t = TableSchema::new("t", vec![FamilySchema::new("a"), FamilySchema::new("a")]);
        assert!(t.validate().expect_err("dup").to_string().contains("twice"));
    }
}
