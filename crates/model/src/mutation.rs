//! Mutations: what a client asks a region to write.

use crate::cell::CellType;
use bytes::Bytes;

/// How a mutation's entries are applied: written as they are (puts and deletes), or read and
/// combined with what the row holds (increments add 8-byte big-endian amounts, appends add
/// bytes at the end). The wire's "unspecified" never gets past the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MutationKind {
    PutDelete,
    Increment,
    Append,
}

/// How durable a mutation must be before it is acknowledged (HBase's levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The family's or table's default: `SyncWal`.
    #[default]
    UseDefault,
    /// Not logged: lost if the process dies before a flush.
    SkipWal,
    /// Logged, written to the OS in the background shortly after the acknowledgement.
    AsyncWal,
    /// Logged and handed to the OS (on HDFS, hflushed) before the acknowledgement: survives a
    /// process crash.
    SyncWal,
    /// Logged and fdatasync'ed (on HDFS, hsynced) before the acknowledgement: survives power loss.
    FsyncWal,
}

/// HBase's names, as its Java enum spells them (`SYNC_WAL`); parsing ignores case.
impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Durability, String> {
        Ok(match s.trim().to_ascii_uppercase().as_str() {
            "USE_DEFAULT" => Durability::UseDefault,
            "SKIP_WAL" => Durability::SkipWal,
            "ASYNC_WAL" => Durability::AsyncWal,
            "SYNC_WAL" => Durability::SyncWal,
            "FSYNC_WAL" => Durability::FsyncWal,
            _ => {
                return Err(format!(
                    "'{s}' is not one of USE_DEFAULT, SKIP_WAL, ASYNC_WAL, SYNC_WAL, FSYNC_WAL"
                ))
            }
        })
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::UseDefault => "USE_DEFAULT",
            Durability::SkipWal => "SKIP_WAL",
            Durability::AsyncWal => "ASYNC_WAL",
            Durability::SyncWal => "SYNC_WAL",
            Durability::FsyncWal => "FSYNC_WAL",
        })
    }
}

impl Durability {
    /// The level `UseDefault` stands for.
    pub fn resolve(self) -> Durability {
        match self {
            Durability::UseDefault => Durability::SyncWal,
            d => d,
        }
    }
}

/// One cell of a mutation. For deletes the value is empty; family deletes use the empty
/// qualifier. A timestamp of [`crate::LATEST_TIMESTAMP`] is replaced by the server's clock
/// (for `Delete` of the latest version, HBase semantics apply: see the region's delete path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub family: Bytes,
    pub qualifier: Bytes,
    pub timestamp: u64,
    pub cell_type: CellType,
    pub value: Bytes,
}

/// A client's name for one non-idempotent operation (an increment, an append), so that a
/// retry of it is applied once: HBase's nonce group (one per client) and nonce. The server
/// remembers the nonces it applied, and logs them with the edit so a restart remembers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Nonce {
    pub group: u64,
    pub nonce: u64,
}

/// All changes to one row, applied atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMutation {
    pub row: Bytes,
    pub entries: Vec<Entry>,
    pub durability: Durability,
    /// Set on increments and appends a client may retry (see [`Nonce`]).
    pub nonce: Option<Nonce>,
    /// The clusters this change has already been through, as HBase's WAL keys name them
    /// (`clusterIds`, UUIDs, the originating cluster first): set on edits replicated in, and
    /// logged with the edit, so that replication out never ships a change back to a cluster
    /// that has it (a loop in master-master replication). Empty for a client's own writes.
    pub cluster_ids: Vec<u128>,
}

impl RowMutation {
    /// What every region refuses in a mutation, whatever it holds: an empty or too long row
    /// key, no cells, a family delete with a qualifier, a timestamp past
    /// [`crate::LATEST_TIMESTAMP`]. `family` checks each entry's family against the region's.
    pub fn validate(
        &self,
        mut family: impl FnMut(&[u8]) -> crate::Result<()>,
    ) -> crate::Result<()> {
        use crate::key::MAX_ROW_LEN;
        use crate::{Error, LATEST_TIMESTAMP};
        if self.row.is_empty() {
            return Err(Error::InvalidArgument("row key is empty".into()));
        }
        if self.row.len() > MAX_ROW_LEN {
            return Err(Error::InvalidArgument(format!(
                "row key is {} bytes; the limit is {MAX_ROW_LEN}",
                self.row.len()
            )));
        }
        if self.entries.is_empty() {
            return Err(Error::InvalidArgument("mutation has no cells".into()));
        }
        for e in &self.entries {
            family(&e.family)?;
            if e.cell_type.is_family_delete() && !e.qualifier.is_empty() {
                return Err(Error::InvalidArgument(
                    "a family delete has no qualifier".into(),
                ));
            }
            if e.timestamp > LATEST_TIMESTAMP {
                return Err(Error::InvalidArgument(format!(
                    "timestamp {} is beyond the largest allowed ({LATEST_TIMESTAMP})",
                    e.timestamp
                )));
            }
        }
        Ok(())
    }

    pub fn new(row: impl Into<Bytes>) -> RowMutation {
        RowMutation {
            row: row.into(),
            entries: Vec::new(),
            durability: Durability::UseDefault,
            nonce: None,
            cluster_ids: Vec::new(),
        }
    }

    /// Names the operation for retries ([`Nonce`]).
    pub fn with_nonce(mut self, nonce: Option<Nonce>) -> Self {
        self.nonce = nonce;
        self
    }

    fn push(mut self, family: &[u8], qualifier: &[u8], ts: u64, t: CellType, value: Bytes) -> Self {
        self.entries.push(Entry {
            family: Bytes::copy_from_slice(family),
            qualifier: Bytes::copy_from_slice(qualifier),
            timestamp: ts,
            cell_type: t,
            value,
        });
        self
    }

    /// Adds a put of `value` at `ts`.
    pub fn put(self, family: &[u8], qualifier: &[u8], ts: u64, value: impl Into<Bytes>) -> Self {
        self.push(family, qualifier, ts, CellType::Put, value.into())
    }

    /// Deletes the version of the column at exactly `ts` (the latest, if `ts` is LATEST).
    pub fn delete_version(self, family: &[u8], qualifier: &[u8], ts: u64) -> Self {
        self.push(family, qualifier, ts, CellType::Delete, Bytes::new())
    }

    /// Deletes every version of the column at or before `ts`.
    pub fn delete_column(self, family: &[u8], qualifier: &[u8], ts: u64) -> Self {
        self.push(family, qualifier, ts, CellType::DeleteColumn, Bytes::new())
    }

    /// Deletes every column of the family at or before `ts`.
    pub fn delete_family(self, family: &[u8], ts: u64) -> Self {
        self.push(family, b"", ts, CellType::DeleteFamily, Bytes::new())
    }

    /// Deletes every column of the family at exactly `ts`.
    pub fn delete_family_version(self, family: &[u8], ts: u64) -> Self {
        self.push(family, b"", ts, CellType::DeleteFamilyVersion, Bytes::new())
    }

    pub fn with_durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
}
