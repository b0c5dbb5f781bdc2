//! Snapshot manifests: what a snapshot of a table is (`docs/snapshots.md`). A snapshot copies
//! no data: its manifest names, for each region of the table, the store files that held the
//! region's data when it was taken, each restricted to the region's rows. Store files never
//! change, and one that a region stops using is archived instead of deleted
//! (`cellar_storage::fs::ArchivingFs`), so the files a manifest names stay readable until the
//! last snapshot and the last clone naming them are gone.
//!
//! `<root>/.snapshots/<name>/manifest`, written atomically (so a snapshot is whole or absent):
//!
//! ```text
//! cellar-snapshot v1
//! name=<snapshot name>
//! table=<table name>
//! created_ms=<ms since the epoch>
//! type=flush|skip_flush|disabled                        how it was taken (HBase's type)
//! schema=<hex of a cellar.v1.TableSchema>
//! region=<index>,<hex start key>,<hex end key>          one per region, in key order
//! file=<region index>,<hex family>,<hex path>,<hex start>,<hex end>
//! crc=<CRC32C of everything above, 8 hex digits>
//! ```
//!
//! A file's path is relative to the root (`data/<namespace>/<table>/<region>/<family>/<name>`),
//! so a root moved elsewhere keeps its snapshots.

use crate::error::ServerError;
use bytes::Bytes;
use cellar_model::{Error, TableSchema};
use cellar_proto::{convert, pb};
use cellar_storage::fs::{read_all, write_atomic, FileSystem};
use cellar_storage::region::{hex, unhex, SnapshotFile};
use prost::Message;
use std::path::{Path, PathBuf};

const HEADER: &str = "cellar-snapshot v1";
/// The directory of a root that holds its snapshots.
pub const SNAPSHOTS_DIR: &str = ".snapshots";
const MANIFEST: &str = "manifest";
/// A snapshot being copied in from another root (`cellar export-snapshot`): its manifest under
/// this name while its files arrive. The cleaner keeps the files it names; once they are all
/// there the manifest proper is written and this goes.
const IMPORTING: &str = "importing";

/// A snapshot of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub table: String,
    pub created_ms: u64,
    pub kind: SnapshotKind,
    pub schema: TableSchema,
    pub regions: Vec<SnapshotRegion>,
}

/// How a snapshot was taken (HBase's `SnapshotDescription.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    /// Each region flushed first.
    Flush,
    /// Only what the regions had flushed (`SKIP_FLUSH`).
    SkipFlush,
    /// Of a disabled table (its regions closed, so everything flushed).
    Disabled,
}

impl SnapshotKind {
    fn name(self) -> &'static str {
        match self {
            SnapshotKind::Flush => "flush",
            SnapshotKind::SkipFlush => "skip_flush",
            SnapshotKind::Disabled => "disabled",
        }
    }

    fn parse(s: &str) -> Option<SnapshotKind> {
        Some(match s {
            "flush" => SnapshotKind::Flush,
            "skip_flush" => SnapshotKind::SkipFlush,
            "disabled" => SnapshotKind::Disabled,
            _ => return None,
        })
    }
}

/// One region of a snapshot: its key range and its files (paths relative to the root).
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotRegion {
    pub start_key: Bytes,
    pub end_key: Bytes,
    pub files: Vec<SnapshotFile>,
}

/// The directory of snapshot `name`.
pub fn snapshot_dir(root: &Path, name: &str) -> PathBuf {
    root.join(SNAPSHOTS_DIR).join(name)
}

/// HBase's rule for a snapshot's name (a table qualifier's): `[A-Za-z0-9_.-]`, not starting
/// with `.` or `-`, at most 200 bytes.
pub fn check_name(name: &str) -> Result<(), ServerError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ServerError::invalid(format!(
            "illegal snapshot name {name:?}: use letters, digits, '_', '.' and '-', not starting \
             with '.' or '-', at most 200 characters"
        )))
    }
}

impl Manifest {
    fn encode(&self, root: &Path) -> Result<String, ServerError> {
        let schema = convert::schema_to_pb(&self.schema).encode_to_vec();
        let mut body = format!(
            "{HEADER}\nname={}\ntable={}\ncreated_ms={}\ntype={}\nschema={}\n",
            self.name,
            self.table,
            self.created_ms,
            self.kind.name(),
            hex(&schema)
        );
        for (i, r) in self.regions.iter().enumerate() {
            body += &format!("region={i},{},{}\n", hex(&r.start_key), hex(&r.end_key));
        }
        for (i, r) in self.regions.iter().enumerate() {
            for f in &r.files {
                let rel = f.path.strip_prefix(root).map_err(|_| {
                    ServerError::Internal(format!(
                        "store file {} is outside the root {}",
                        f.path.display(),
                        root.display()
                    ))
                })?;
                body += &format!(
                    "file={i},{},{},{},{}\n",
                    hex(f.family.as_bytes()),
                    hex(rel.to_string_lossy().as_bytes()),
                    hex(&f.start),
                    hex(&f.end)
                );
            }
        }
        Ok(format!(
            "{body}crc={:08x}\n",
            crc32c::crc32c(body.as_bytes())
        ))
    }

    fn decode(text: &str, root: &Path, file: &str) -> Result<Manifest, ServerError> {
        let bad = |what: &str| -> ServerError {
            Error::corruption(file, 0, format!("snapshot manifest: {what}")).into()
        };
        let crc_at = text.rfind("crc=").ok_or_else(|| bad("no checksum"))?;
        let (body, crc) = text.split_at(crc_at);
        if format!("crc={:08x}\n", crc32c::crc32c(body.as_bytes())) != crc {
            return Err(Error::checksum(file, crc_at as u64, "snapshot manifest").into());
        }
        let mut lines = body.lines();
        match lines.next() {
            Some(HEADER) => {}
            Some(h) if h.starts_with("cellar-snapshot v") => {
                return Err(Error::UnsupportedVersion {
                    file: file.to_string(),
                    found: h
                        .trim_start_matches("cellar-snapshot v")
                        .parse()
                        .unwrap_or(u32::MAX),
                    supported: 1,
                }
                .into())
            }
            _ => return Err(bad("not a Cellar snapshot manifest")),
        }
        let mut field = |key: &str| -> Result<String, ServerError> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix('='))
                .map(str::to_string)
                .ok_or_else(|| bad(&format!("no '{key}'")))
        };
        let name = field("name")?;
        let table = field("table")?;
        let created_ms = field("created_ms")?
            .parse()
            .map_err(|_| bad("created_ms is not a number"))?;
        let kind = SnapshotKind::parse(&field("type")?).ok_or_else(|| bad("unknown type"))?;
        let schema = unhex(&field("schema")?)
            .and_then(|b| pb::TableSchema::decode(&b[..]).ok())
            .ok_or_else(|| bad("undecodable schema"))?;
        let schema = convert::schema_from_pb(schema).map_err(|e| bad(&format!("schema: {e}")))?;
        let mut regions: Vec<SnapshotRegion> = Vec::new();
        for line in lines {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| bad("a line without '='"))?;
            let parts: Vec<&str> = value.split(',').collect();
            let index = |s: &str| s.parse::<usize>().map_err(|_| bad("a bad region index"));
            let bytes = |s: &str| unhex(s).ok_or_else(|| bad("bad hex"));
            match (key, parts.as_slice()) {
                ("region", [i, start, end]) => {
                    if index(i)? != regions.len() {
                        return Err(bad("regions out of order"));
                    }
                    regions.push(SnapshotRegion {
                        start_key: bytes(start)?.into(),
                        end_key: bytes(end)?.into(),
                        files: Vec::new(),
                    });
                }
                ("file", [i, family, path, start, end]) => {
                    let family = String::from_utf8(bytes(family)?)
                        .map_err(|_| bad("a family name is not UTF-8"))?;
                    let path =
                        String::from_utf8(bytes(path)?).map_err(|_| bad("a path is not UTF-8"))?;
                    if path.split('/').any(|c| c == ".." || c == ".") || path.starts_with('/') {
                        return Err(bad("a file path leaves the root"));
                    }
                    let region = regions
                        .get_mut(index(i)?)
                        .ok_or_else(|| bad("a file of an unknown region"))?;
                    region.files.push(SnapshotFile {
                        family,
                        path: root.join(path),
                        start: bytes(start)?,
                        end: bytes(end)?,
                    });
                }
                _ => return Err(bad(&format!("unknown line '{key}'"))),
            }
        }
        Ok(Manifest {
            name,
            table,
            created_ms,
            kind,
            schema,
            regions,
        })
    }

    /// Writes the manifest of a new snapshot (whole or not at all).
    pub fn write(&self, fs: &dyn FileSystem, root: &Path) -> Result<(), ServerError> {
        self.write_as(fs, root, MANIFEST)
    }

    /// Writes this manifest as snapshot `name`'s `importing` file: its files are arriving.
    pub fn write_importing(&self, fs: &dyn FileSystem, root: &Path) -> Result<(), ServerError> {
        self.write_as(fs, root, IMPORTING)
    }

    /// Removes the `importing` file once the manifest proper is written.
    pub fn imported(&self, fs: &dyn FileSystem, root: &Path) -> Result<(), ServerError> {
        let path = snapshot_dir(root, &self.name).join(IMPORTING);
        if fs.exists(&path)? {
            fs.delete(&path)?;
        }
        Ok(())
    }

    fn write_as(&self, fs: &dyn FileSystem, root: &Path, file: &str) -> Result<(), ServerError> {
        let dir = snapshot_dir(root, &self.name);
        cellar_storage::fs::create_dir_durable(fs, &dir)?;
        let text = self.encode(root)?;
        write_atomic(fs, &dir.join(file), text.as_bytes())?;
        Ok(())
    }

    /// The same snapshot with its files under another root (same relative paths).
    pub fn rerooted(&self, from: &Path, to: &Path) -> Manifest {
        let mut m = self.clone();
        for r in &mut m.regions {
            for f in &mut r.files {
                if let Ok(rel) = f.path.strip_prefix(from) {
                    f.path = to.join(rel);
                }
            }
        }
        m
    }

    /// The manifest of snapshot `name`; `None` if there is none.
    pub fn read(
        fs: &dyn FileSystem,
        root: &Path,
        name: &str,
    ) -> Result<Option<Manifest>, ServerError> {
        Manifest::read_file(fs, root, &snapshot_dir(root, name).join(MANIFEST))
    }

    fn read_file(
        fs: &dyn FileSystem,
        root: &Path,
        path: &Path,
    ) -> Result<Option<Manifest>, ServerError> {
        let path = path.to_path_buf();
        if !fs.exists(&path)? {
            return Ok(None);
        }
        let data = read_all(fs, &path)?;
        let text = std::str::from_utf8(&data).map_err(|_| {
            ServerError::from(Error::corruption(
                path.display().to_string(),
                0,
                "snapshot manifest is not UTF-8",
            ))
        })?;
        Manifest::decode(text, root, &path.display().to_string()).map(Some)
    }
}

/// Every snapshot of the root, by name. A directory without a manifest (a snapshot that a
/// crash interrupted) is no snapshot and is left for [`remove_incomplete`].
pub fn list(fs: &dyn FileSystem, root: &Path) -> Result<Vec<Manifest>, ServerError> {
    let dir = root.join(SNAPSHOTS_DIR);
    if !fs.exists(&dir)? {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for name in fs.list(&dir)? {
        if let Some(m) = Manifest::read(fs, root, &name)? {
            out.push(m);
        }
    }
    Ok(out)
}

/// Snapshots being copied in (`importing`, see [`Manifest::write_importing`]): their files
/// must be kept although no manifest names them yet.
pub fn importing(fs: &dyn FileSystem, root: &Path) -> Result<Vec<Manifest>, ServerError> {
    let dir = root.join(SNAPSHOTS_DIR);
    if !fs.exists(&dir)? {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for name in fs.list(&dir)? {
        if let Some(m) = Manifest::read_file(fs, root, &dir.join(&name).join(IMPORTING))? {
            out.push(m);
        }
    }
    Ok(out)
}

/// Removes snapshot directories without a manifest (interrupted before their commit); one
/// being copied in (`importing`) stays.
pub fn remove_incomplete(fs: &dyn FileSystem, root: &Path) -> Result<(), ServerError> {
    let dir = root.join(SNAPSHOTS_DIR);
    if !fs.exists(&dir)? {
        return Ok(());
    }
    for name in fs.list(&dir)? {
        if !fs.exists(&dir.join(&name).join(MANIFEST))?
            && !fs.exists(&dir.join(&name).join(IMPORTING))?
        {
            tracing::info!(snapshot = %name, "removing a snapshot that was interrupted before it was written");
            fs.delete_dir_all(&dir.join(&name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::FamilySchema;
    use cellar_storage::fs::LocalFs;

    #[test]
    fn manifests_round_trip_and_refuse_damage() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = tmp.path();
        let fs = LocalFs::shared();
        let m = Manifest {
            name: "s1".into(),
            table: "ns:t".into(),
            created_ms: 42,
            kind: SnapshotKind::SkipFlush,
            schema: TableSchema::new("ns:t", vec![FamilySchema::new("cf")]),
            regions: vec![
                SnapshotRegion {
                    start_key: Bytes::new(),
                    end_key: Bytes::from_static(b"m,\x00"),
                    files: vec![SnapshotFile {
                        family: "cf".into(),
                        path: root.join("data/ns/t/7/cf/01.sf"),
                        start: Vec::new(),
                        end: b"m,\x00".to_vec(),
                    }],
                },
                SnapshotRegion {
                    start_key: Bytes::from_static(b"m,\x00"),
                    end_key: Bytes::new(),
                    files: Vec::new(),
                },
            ],
        };
        m.write(&*fs, root).expect("write");
        assert_eq!(
            Manifest::read(&*fs, root, "s1").expect("read"),
            Some(m.clone())
        );
        assert_eq!(list(&*fs, root).expect("list"), vec![m]);
        assert_eq!(Manifest::read(&*fs, root, "nope").expect("read"), None);
        let path = root.join(".snapshots/s1/manifest");
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(&path, text.replace("table=ns:t", "table=ns:u")).expect("write");
        let e = Manifest::read(&*fs, root, "s1").expect_err("damaged");
        assert!(e.to_string().contains("checksum"), "{e}");
        // An interrupted snapshot's directory is no snapshot and is removed.
        std::fs::create_dir_all(root.join(".snapshots/half")).expect("mkdir");
        std::fs::remove_file(&path).expect("rm");
        assert!(list(&*fs, root).expect("list").is_empty());
        remove_incomplete(&*fs, root).expect("remove");
        assert!(!root.join(".snapshots/half").exists());
        for bad in ["", ".x", "-x", "a b", "a/b", "a:b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("snap-1.2_x").expect("legal");
    }
}
