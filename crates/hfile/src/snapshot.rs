//! HBase snapshots (`docs/hfile-format.md` §9): what a snapshot directory says about its table
//! (schema, regions) and where each store file it names lives: in the table's data
//! directory, or in the archive once compactions or a table deletion moved it there, through
//! HFile links (files of another table, a clone's) and references (half of a parent's file
//! after a split).

use crate::input::{pb_fields, Bad, Field};
use crate::reader::Source;
use md5::{Digest, Md5};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A file opened on a [`Files`]: its bytes and its length.
pub type Opened = (Box<dyn Source>, u64);

/// The file system a snapshot is read from: local disk ([`LocalFiles`]), or one a caller
/// adapts (the `cellar` binary reads an HBase root on HDFS through Cellar's HDFS client).
/// Paths are `/`-separated, absolute within that file system.
pub trait Files: Send + Sync {
    /// The file at `path` and its length; `None` when there is no file there (nothing, or a
    /// directory).
    fn open(&self, path: &Path) -> Result<Option<Opened>, String>;
    /// Whether anything (a file or a directory) is at `path`.
    fn exists(&self, path: &Path) -> Result<bool, String>;
}

/// The local file system.
pub struct LocalFiles;

impl Files for LocalFiles {
    fn open(&self, path: &Path) -> Result<Option<Opened>, String> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let meta = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(meta
            .is_file()
            .then(|| (Box::new(file) as Box<dyn Source>, meta.len())))
    }

    fn exists(&self, path: &Path) -> Result<bool, String> {
        path.try_exists()
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// The largest manifest read (HBase's own default cap, `snapshot.manifest.size.limit`).
const MAX_MANIFEST: u64 = 64 << 20;

/// A completed snapshot of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub name: String,
    /// The table's namespace (`default` when it has none) and name.
    pub namespace: String,
    pub qualifier: String,
    /// Taken at (ms).
    pub creation_time: i64,
    pub families: Vec<Family>,
    pub table_attributes: BTreeMap<String, String>,
    /// Sorted by start key; split parents left out (their daughters' references name their
    /// files).
    pub regions: Vec<Region>,
}

/// A column family and its settings as HBase stores them (`VERSIONS`, `TTL`, `COMPRESSION`,
/// `BLOOMFILTER`, `KEEP_DELETED_CELLS`, ...); a setting left at HBase's default may be absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub name: String,
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub region_id: u64,
    pub start_key: Vec<u8>,
    pub end_key: Vec<u8>,
    /// The directory name: the MD5 of the region name.
    pub encoded_name: String,
    pub files: Vec<StoreFile>,
}

/// One store file of a region, found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFile {
    pub family: String,
    /// As the manifest names it.
    pub name: String,
    /// Where the HFile is.
    pub path: PathBuf,
    /// The rows of it that belong to the region: all (both empty), or the half a reference
    /// gives it, `[keep_from, keep_to)`.
    pub keep_from: Vec<u8>,
    pub keep_to: Vec<u8>,
    /// Its size as the manifest records it (0: not recorded).
    pub size: u64,
}

impl Snapshot {
    /// The table name as HBase writes it: `ns:table`, or `table` in the default namespace.
    pub fn table(&self) -> String {
        table_name(&self.namespace, &self.qualifier)
    }

    /// Reads snapshot `name` under HBase root directory `root` (its `hbase.rootdir`) on local
    /// disk, and finds every store file it names. An error names what is missing or damaged.
    pub fn open(root: &Path, name: &str) -> Result<Snapshot, String> {
        Snapshot::open_in(&LocalFiles, root, name)
    }

    /// [`Snapshot::open`] on the file system `fs`.
    pub fn open_in(fs: &dyn Files, root: &Path, name: &str) -> Result<Snapshot, String> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(format!("'{name}' is not a snapshot name"));
        }
        let dir = root.join(".hbase-snapshot").join(name);
        if !fs.exists(&dir)? {
            return Err(format!(
                "no snapshot '{name}' under {} (its .hbase-snapshot/{name} is missing)",
                root.display()
            ));
        }
        let info = read_small(fs, &dir.join(".snapshotinfo"))?;
        let (mut snapshot_name, mut version, mut creation_time) = (String::new(), 0i64, 0i64);
        let at = |what: &str| format!("{}: {what}", dir.join(".snapshotinfo").display());
        pb_fields(&info, "snapshot description", |n, f| {
            match (n, f) {
                (1, Field::Bytes(b)) => snapshot_name = String::from_utf8_lossy(b).into_owned(),
                (3, Field::Varint(v)) => creation_time = v as i64,
                (5, Field::Varint(v)) => version = v as i64,
                _ => {}
            }
            Ok(())
        })
        .map_err(|e| at(&e))?;
        if version != 2 {
            return Err(at(&format!(
                "snapshot format version {version}; Cellar reads version 2 (HBase 0.98.9 and later write it)"
            )));
        }
        let manifest_path = dir.join("data.manifest");
        let mut regions_pb: Vec<Vec<u8>> = Vec::new();
        let mut schema: Option<Vec<u8>> = None;
        if let Some(manifest) = read_if_present(fs, &manifest_path)? {
            pb_fields(&manifest, "snapshot manifest", |n, f| {
                match (n, f) {
                    (1, Field::Bytes(b)) => schema = Some(b.to_vec()),
                    (2, Field::Bytes(b)) => regions_pb.push(b.to_vec()),
                    _ => {}
                }
                Ok(())
            })
            .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        } else {
            return Err(format!(
                "{} is missing: the snapshot is not complete (or was taken by a HBase that failed part way)",
                manifest_path.display()
            ));
        }
        let schema =
            schema.ok_or_else(|| format!("{}: no table schema", manifest_path.display()))?;
        let (namespace, qualifier, families, table_attributes) =
            parse_schema(&schema).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        let table = table_name(&namespace, &qualifier);
        let mut regions = Vec::new();
        for r in &regions_pb {
            let parsed =
                parse_region(r).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
            if parsed.offline && parsed.split {
                continue;
            }
            let encoded_name = encoded_region_name(
                &table,
                &parsed.start_key,
                parsed.region_id,
                parsed.replica_id,
            );
            let mut files = Vec::new();
            for (family, name, reference, size) in parsed.files {
                let (path, keep_from, keep_to) = locate(
                    fs,
                    root,
                    &namespace,
                    &qualifier,
                    &encoded_name,
                    &family,
                    &name,
                    reference.as_ref(),
                )?;
                files.push(StoreFile {
                    family,
                    name,
                    path,
                    keep_from,
                    keep_to,
                    size,
                });
            }
            regions.push(Region {
                region_id: parsed.region_id,
                start_key: parsed.start_key,
                end_key: parsed.end_key,
                encoded_name,
                files,
            });
        }
        regions.sort_by(|a, b| a.start_key.cmp(&b.start_key));
        Ok(Snapshot {
            name: snapshot_name,
            namespace,
            qualifier,
            creation_time,
            families,
            table_attributes,
            regions,
        })
    }
}

/// A whole small file (a manifest); an error when it is missing.
fn read_small(fs: &dyn Files, path: &Path) -> Result<Vec<u8>, String> {
    read_if_present(fs, path)?.ok_or_else(|| format!("{} is missing", path.display()))
}

/// A whole small file, or `None` when there is none; its length is checked before a byte of
/// it is read.
fn read_if_present(fs: &dyn Files, path: &Path) -> Result<Option<Vec<u8>>, String> {
    let Some((file, len)) = fs.open(path)? else {
        return Ok(None);
    };
    if len > MAX_MANIFEST {
        return Err(format!(
            "{}: {len} bytes, more than the {MAX_MANIFEST} a manifest may have",
            path.display()
        ));
    }
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(bytes))
}

fn table_name(namespace: &str, qualifier: &str) -> String {
    if namespace.is_empty() || namespace == "default" {
        qualifier.to_string()
    } else {
        format!("{namespace}:{qualifier}")
    }
}

/// The region's directory name: the hex MD5 of `table,start_key,region_id[_replica]`.
pub fn encoded_region_name(
    table: &str,
    start_key: &[u8],
    region_id: u64,
    replica_id: u32,
) -> String {
    let mut name = Vec::new();
    name.extend_from_slice(table.as_bytes());
    name.push(b',');
    name.extend_from_slice(start_key);
    name.push(b',');
    name.extend_from_slice(region_id.to_string().as_bytes());
    if replica_id > 0 {
        name.extend_from_slice(format!("_{replica_id:04X}").as_bytes());
    }
    Md5::digest(&name)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

type Schema = (String, String, Vec<Family>, BTreeMap<String, String>);

fn utf8(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `BytesBytesPair` → (first, second).
fn pair(b: &[u8]) -> Result<(String, String), Bad> {
    let (mut k, mut v) = (String::new(), String::new());
    pb_fields(b, "attribute", |n, f| {
        match (n, f) {
            (1, Field::Bytes(x)) => k = utf8(x),
            (2, Field::Bytes(x)) => v = utf8(x),
            _ => {}
        }
        Ok(())
    })?;
    Ok((k, v))
}

fn parse_table_name(b: &[u8]) -> Result<(String, String), Bad> {
    let (mut ns, mut q) = (String::new(), String::new());
    pb_fields(b, "table name", |n, f| {
        match (n, f) {
            (1, Field::Bytes(x)) => ns = utf8(x),
            (2, Field::Bytes(x)) => q = utf8(x),
            _ => {}
        }
        Ok(())
    })?;
    Ok((ns, q))
}

fn parse_schema(b: &[u8]) -> Result<Schema, Bad> {
    let (mut ns, mut q) = (String::new(), String::new());
    let mut families = Vec::new();
    let mut attributes = BTreeMap::new();
    pb_fields(b, "table schema", |n, f| {
        match (n, f) {
            (1, Field::Bytes(x)) => (ns, q) = parse_table_name(x)?,
            (2, Field::Bytes(x)) => {
                let (k, v) = pair(x)?;
                attributes.insert(k, v);
            }
            (3, Field::Bytes(x)) => {
                let mut family = Family {
                    name: String::new(),
                    attributes: BTreeMap::new(),
                };
                pb_fields(x, "column family", |n, f| {
                    match (n, f) {
                        (1, Field::Bytes(y)) => family.name = utf8(y),
                        (2, Field::Bytes(y)) => {
                            let (k, v) = pair(y)?;
                            family.attributes.insert(k, v);
                        }
                        _ => {}
                    }
                    Ok(())
                })?;
                families.push(family);
            }
            _ => {}
        }
        Ok(())
    })?;
    if q.is_empty() {
        return Err("the table schema names no table".into());
    }
    Ok((ns, q, families, attributes))
}

/// A reference's split row, and whether the region holds the top half (rows from it).
type SplitHalf = (Vec<u8>, bool);

/// A store file as a region manifest lists it: family, name, reference, size.
type ListedFile = (String, String, Option<SplitHalf>, u64);

/// A region manifest: its region and its files.
struct ParsedRegion {
    region_id: u64,
    start_key: Vec<u8>,
    end_key: Vec<u8>,
    offline: bool,
    split: bool,
    replica_id: u32,
    files: Vec<ListedFile>,
}

fn parse_region(b: &[u8]) -> Result<ParsedRegion, Bad> {
    let mut r = ParsedRegion {
        region_id: 0,
        start_key: Vec::new(),
        end_key: Vec::new(),
        offline: false,
        split: false,
        replica_id: 0,
        files: Vec::new(),
    };
    pb_fields(b, "region manifest", |n, f| {
        match (n, f) {
            (2, Field::Bytes(info)) => pb_fields(info, "region info", |n, f| {
                match (n, f) {
                    (1, Field::Varint(v)) => r.region_id = v,
                    (3, Field::Bytes(x)) => r.start_key = x.to_vec(),
                    (4, Field::Bytes(x)) => r.end_key = x.to_vec(),
                    (5, Field::Varint(v)) => r.offline = v != 0,
                    (6, Field::Varint(v)) => r.split = v != 0,
                    (7, Field::Varint(v)) => r.replica_id = v as u32,
                    _ => {}
                }
                Ok(())
            })?,
            (3, Field::Bytes(ff)) => {
                let mut family = String::new();
                let mut files = Vec::new();
                pb_fields(ff, "family files", |n, f| {
                    match (n, f) {
                        (1, Field::Bytes(x)) => family = utf8(x),
                        (2, Field::Bytes(sf)) => {
                            let (mut name, mut reference, mut size) = (String::new(), None, 0u64);
                            pb_fields(sf, "store file", |n, f| {
                                match (n, f) {
                                    (1, Field::Bytes(x)) => name = utf8(x),
                                    (2, Field::Bytes(x)) => reference = Some(parse_reference(x)?),
                                    (3, Field::Varint(v)) => size = v,
                                    _ => {}
                                }
                                Ok(())
                            })?;
                            files.push((name, reference, size));
                        }
                        _ => {}
                    }
                    Ok(())
                })?;
                for (name, reference, size) in files {
                    r.files.push((family.clone(), name, reference, size));
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(r)
}

/// A `Reference`: the split row (from its KeyValue split key) and whether the region holds the
/// top half (rows from it) or the bottom (rows below it).
fn parse_reference(b: &[u8]) -> Result<(Vec<u8>, bool), Bad> {
    let (mut key, mut top) = (Vec::new(), true);
    pb_fields(b, "reference", |n, f| {
        match (n, f) {
            (1, Field::Bytes(x)) => key = x.to_vec(),
            (2, Field::Varint(v)) => top = v == 0,
            _ => {}
        }
        Ok(())
    })?;
    let row = match key.as_slice() {
        [a, b, rest @ ..] => rest
            .get(..usize::from(u16::from_be_bytes([*a, *b])))
            .ok_or("a reference's split key is shorter than its row")?
            .to_vec(),
        _ => return Err("a reference without its split key".into()),
    };
    Ok((row, top))
}

fn is_encoded_region(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Finds a store file: the table, region and file a link or reference names, probed in the
/// data directory, then the archive, then the temporary and MOB directories.
#[allow(clippy::too_many_arguments)]
fn locate(
    fs: &dyn Files,
    root: &Path,
    namespace: &str,
    qualifier: &str,
    region: &str,
    family: &str,
    name: &str,
    reference: Option<&(Vec<u8>, bool)>,
) -> Result<(PathBuf, Vec<u8>, Vec<u8>), String> {
    let (mut ns, mut table, mut reg, mut file) = (
        namespace.to_string(),
        qualifier.to_string(),
        region.to_string(),
        name.to_string(),
    );
    let (mut keep_from, mut keep_to) = (Vec::new(), Vec::new());
    if let Some((referenced, parent)) = name.rsplit_once('.').filter(|(_, p)| is_encoded_region(p))
    {
        let (split_row, top) = reference.cloned().ok_or_else(|| {
            format!("store file {name} of region {region} looks like a reference but the snapshot gives no split key")
        })?;
        if top {
            keep_from = split_row;
        } else {
            keep_to = split_row;
        }
        reg = parent.to_string();
        file = referenced.to_string();
    }
    if file.contains('=') {
        let parts: Vec<&str> = file.split('=').collect();
        let (link_ns, link_table, rest) = match parts.as_slice() {
            [t, rest] => ("default", *t, *rest),
            [n, t, rest] => (*n, *t, *rest),
            _ => return Err(format!("store file {name}: not an HFile link name")),
        };
        let (link_region, hfile) = rest
            .split_once('-')
            .ok_or_else(|| format!("store file {name}: not an HFile link name"))?;
        ns = link_ns.to_string();
        table = link_table.to_string();
        reg = link_region.to_string();
        file = hfile.to_string();
    }
    let ns = if ns.is_empty() {
        "default".to_string()
    } else {
        ns
    };
    let tail = Path::new("data")
        .join(&ns)
        .join(&table)
        .join(&reg)
        .join(family)
        .join(&file);
    let candidates = [
        root.join(&tail),
        root.join("archive").join(&tail),
        root.join(".tmp").join(&tail),
        root.join("mobdir").join(&tail),
    ];
    for p in candidates {
        if fs.open(&p)?.is_some() {
            return Ok((p, keep_from, keep_to));
        }
    }
    Err(format!(
            "store file {name} of region {region}, family {family}: {} is in neither the data directory nor the archive",
            tail.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_directory_names_are_the_md5_of_the_region_name() {
        // md5("t,,1") computed independently (coreutils md5sum).
        assert_eq!(
            encoded_region_name("t", b"", 1, 0),
            "7b520268c67d8870e20f6d880327ab7e"
        );
    }
}
