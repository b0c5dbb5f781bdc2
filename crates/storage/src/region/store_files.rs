//! A store's files on disk: naming, reference files (a daughter's view of half a parent file),
//! compaction markers, and handles that delete a replaced file once no reader holds it.
//!
//! Directory of a store: `<region>/<family hex>/`, holding
//! - `<number:016x>-<writer:016x>.sf`: store files (`<number:016x>.sf` before writer tags;
//!   both are read);
//! - `<number:016x>.ref`: references to a parent's store file, restricted to a row range;
//! - `<number:016x>-<writer:016x>.compaction` (or `<number:016x>.compaction`): a compaction's
//!   inputs and outputs, written before its first output is renamed into place, so a crash
//!   part way through is finished (every output in place: the inputs go) or undone (the
//!   outputs in place go) on open instead of leaving the same cells twice;
//! - `*.tmp`: half-written files, deleted on open.
//!
//! The writer tag is random, drawn each time a store is opened: two processes that ever
//! wrote one region directory at once (which assignment rules out) could not write, rename
//! or delete each other's files by name.
//!
//! Formats in `docs/region-layout.md`.

use super::descriptor::{hex, unhex};
use crate::block_cache::{BlockCache, Priority};
use crate::fs::{read_all, write_atomic, FsRef};
use crate::iter::{CellIter, RangeIter};
use crate::storefile::{RowProbe, StoreFile};
use cellar_model::key::KeyRef;
use cellar_model::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Process-unique ids for the block cache: two opens of one file are two ids.
static NEXT_FILE_ID: AtomicU64 = AtomicU64::new(1);

pub fn next_file_id() -> u64 {
    NEXT_FILE_ID.fetch_add(1, Ordering::Relaxed)
}

/// A new writer tag (see the module's comment): std's hasher keys come from the operating
/// system's randomness, and the clock, the process and a counter go in too.
pub fn new_writer_tag() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static TAGS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(TAGS.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.finish()
}

/// A store file's name before writer tags (still read).
pub fn store_file_name(number: u64) -> String {
    format!("{number:016x}.sf")
}

/// The name of store file `number` written under writer tag `writer`.
pub fn tagged_store_file_name(number: u64, writer: u64) -> String {
    format!("{number:016x}-{writer:016x}.sf")
}

/// The name of compaction marker `number` written under writer tag `writer`.
pub fn tagged_marker_file_name(number: u64, writer: u64) -> String {
    format!("{number:016x}-{writer:016x}.compaction")
}

pub fn ref_file_name(number: u64) -> String {
    format!("{number:016x}.ref")
}

/// The number in a file name like `00000000000000a1.sf` or, with a writer tag,
/// `00000000000000a1-5f3c0e9a7b21d4c8.sf`; and its extension.
pub fn parse_number(name: &str) -> Option<(u64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    let number = match stem.split_once('-') {
        None => stem,
        Some((number, writer)) => {
            if writer.len() != 16 || u64::from_str_radix(writer, 16).is_err() {
                return None;
            }
            number
        }
    };
    if number.len() != 16 {
        return None;
    }
    Some((u64::from_str_radix(number, 16).ok()?, ext))
}

/// A reference: rows `[start, end)` of the store file at `parent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub parent: PathBuf,
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

const REF_HEADER: &str = "cellar-reference v1";

impl Reference {
    pub fn write(&self, fs: &FsRef, path: &Path) -> Result<()> {
        let body = format!(
            "{REF_HEADER}\nparent={}\nstart={}\nend={}\n",
            hex(self.parent.to_string_lossy().as_bytes()),
            hex(&self.start),
            hex(&self.end)
        );
        let text = format!("{body}crc={:08x}\n", crc32c::crc32c(body.as_bytes()));
        write_atomic(fs.as_ref(), path, text.as_bytes())
    }

    pub fn read(fs: &FsRef, path: &Path) -> Result<Reference> {
        let name = path.display().to_string();
        let data = read_all(fs.as_ref(), path)?;
        let text = std::str::from_utf8(&data)
            .map_err(|_| Error::corruption(&name, 0, "reference is not UTF-8"))?;
        let Some(crc_at) = text.rfind("crc=") else {
            return Err(Error::corruption(&name, 0, "reference has no checksum"));
        };
        let (body, crc) = text.split_at(crc_at);
        if format!("crc={:08x}\n", crc32c::crc32c(body.as_bytes())) != crc {
            return Err(Error::checksum(&name, crc_at as u64, "reference file"));
        }
        let mut lines = body.lines();
        match lines.next() {
            Some(REF_HEADER) => {}
            Some(h) if h.starts_with("cellar-reference v") => {
                return Err(Error::UnsupportedVersion {
                    file: name,
                    found: h
                        .trim_start_matches("cellar-reference v")
                        .parse()
                        .unwrap_or(u32::MAX),
                    supported: 1,
                })
            }
            _ => {
                return Err(Error::BadMagic {
                    file: name,
                    kind: "reference file",
                    found: 0,
                })
            }
        }
        let mut field = |key: &str| -> Result<Vec<u8>> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix('='))
                .and_then(unhex)
                .ok_or_else(|| {
                    Error::corruption(&name, 0, format!("reference lacks a valid '{key}'"))
                })
        };
        let parent = String::from_utf8(field("parent")?)
            .map_err(|_| Error::corruption(&name, 0, "parent path is not UTF-8"))?;
        Ok(Reference {
            parent: PathBuf::from(parent),
            start: field("start")?,
            end: field("end")?,
        })
    }
}

/// A compaction marker: the files a compaction replaces and the files it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub inputs: Vec<String>,
    /// `None` in a version 1 marker, which names no outputs: its one output is the store file
    /// with the marker's own number.
    pub outputs: Option<Vec<String>>,
}

/// First line of a version 2 marker (version 1 has no header: every line is an input).
const MARKER_V2: &str = "cellar-compaction v2";

/// Writes a compaction marker (version 2; version 1 when it names no outputs).
pub fn write_marker(fs: &FsRef, path: &Path, marker: &Marker) -> Result<()> {
    let body = match &marker.outputs {
        None => marker.inputs.join("\n"),
        Some(outputs) => {
            let mut lines = vec![MARKER_V2.to_string()];
            lines.extend(marker.inputs.iter().map(|n| format!("in {n}")));
            lines.extend(outputs.iter().map(|n| format!("out {n}")));
            lines.join("\n")
        }
    };
    let text = format!("{body}\ncrc={:08x}\n", crc32c::crc32c(body.as_bytes()));
    write_atomic(fs.as_ref(), path, text.as_bytes())
}

/// The marker at `path`; `None` if it is damaged (it was written atomically, so damage means
/// outside interference: the caller keeps every file, losing nothing).
pub fn read_marker(fs: &FsRef, path: &Path) -> Result<Option<Marker>> {
    let data = read_all(fs.as_ref(), path)?;
    let Ok(text) = std::str::from_utf8(&data) else {
        return Ok(None);
    };
    let Some(crc_at) = text.rfind("crc=") else {
        return Ok(None);
    };
    let (body_nl, crc) = text.split_at(crc_at);
    let body = body_nl.strip_suffix('\n').unwrap_or(body_nl);
    if format!("crc={:08x}\n", crc32c::crc32c(body.as_bytes())) != crc {
        return Ok(None);
    }
    // Lines end at '\n' alone, as `write_marker` joins them: `str::lines` would also drop a
    // '\r' that is part of a name. An empty name names no file (and could not be written
    // back).
    let lines = body.split('\n');
    if body.split('\n').next() == Some(MARKER_V2) {
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        for line in lines.skip(1) {
            if let Some(name) = line.strip_prefix("in ") {
                inputs.extend((!name.is_empty()).then(|| name.to_owned()));
            } else if let Some(name) = line.strip_prefix("out ") {
                outputs.extend((!name.is_empty()).then(|| name.to_owned()));
            } else {
                return Ok(None);
            }
        }
        return Ok(Some(Marker {
            inputs,
            outputs: Some(outputs),
        }));
    }
    // The header is no file's name (a version 1 marker starting with it would read back as
    // version 2).
    Ok(Some(Marker {
        inputs: lines
            .filter(|l| !l.is_empty() && *l != MARKER_V2)
            .map(str::to_owned)
            .collect(),
        outputs: None,
    }))
}

/// An open store file (or reference) in a store's file set. When a compaction replaces it, it
/// is marked obsolete and its file is deleted once the last reader lets go.
pub struct StoreFileHandle {
    pub number: u64,
    /// The `.sf` or `.ref` file this store owns.
    pub own_path: PathBuf,
    pub file: Arc<StoreFile>,
    pub reference: Option<Reference>,
    /// The compaction level the store keeps the file at (`levels.rs`): starts as the one
    /// written in the file (0 for a reference) and changes when a compaction moves the file
    /// down without rewriting it.
    level: AtomicU8,
    obsolete: AtomicBool,
    fs: FsRef,
    cache: Option<Arc<BlockCache>>,
}

impl StoreFileHandle {
    /// Opens a `.sf` or `.ref` file.
    pub fn open(
        fs: &FsRef,
        own_path: PathBuf,
        number: u64,
        cache: Option<Arc<BlockCache>>,
        priority: Priority,
    ) -> Result<Arc<StoreFileHandle>> {
        let reference = if own_path.extension().is_some_and(|e| e == "ref") {
            Some(Reference::read(fs, &own_path)?)
        } else {
            None
        };
        let data_path = reference
            .as_ref()
            .map_or(own_path.as_path(), |r| r.parent.as_path());
        let file = StoreFile::open(fs, data_path, next_file_id(), cache.clone(), priority)?;
        let level = if reference.is_some() {
            0
        } else {
            file.meta().level
        };
        Ok(Arc::new(StoreFileHandle {
            number,
            own_path,
            file,
            reference,
            level: AtomicU8::new(level),
            obsolete: AtomicBool::new(false),
            fs: Arc::clone(fs),
            cache,
        }))
    }

    pub fn level(&self) -> u8 {
        self.level.load(Ordering::Acquire)
    }

    /// Moves the file to `level` (callers hold the store's compaction lock).
    pub fn set_level(&self, level: u8) {
        self.level.store(level, Ordering::Release);
    }

    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// An iterator restricted to this handle's rows.
    pub fn iter(&self, fill_cache: bool) -> Box<dyn CellIter> {
        let it = self.file.iter(fill_cache);
        match &self.reference {
            Some(r) => Box::new(RangeIter::new(it, &r.start, &r.end)),
            None => Box::new(it),
        }
    }

    /// False only if no cell of the probed row is in this file (or this reference's half).
    pub fn may_contain_row(&self, probe: &RowProbe<'_>) -> bool {
        let row = probe.row();
        self.reference.as_ref().is_none_or(|r| {
            r.start.as_slice() <= row && (r.end.is_empty() || row < r.end.as_slice())
        }) && self.file.may_contain_probe(probe)
    }

    /// Whether any row of `[start, end)` may be in this file (empty end: unbounded).
    pub fn may_overlap_rows(&self, start: &[u8], end: &[u8]) -> bool {
        let meta = self.file.meta();
        let (Some(first), Some(last)) = (
            KeyRef::parse(&meta.first_key),
            KeyRef::parse(&meta.last_key),
        ) else {
            return false; // no cells
        };
        let (mut lo, mut hi) = (first.row(), Some(last.row()));
        if let Some(r) = &self.reference {
            lo = lo.max(r.start.as_slice());
            if !r.end.is_empty() && hi.is_some_and(|h| h >= r.end.as_slice()) {
                // The reference ends before `r.end`: the last row in it is below that.
                hi = None;
                if lo >= r.end.as_slice() {
                    return false;
                }
            }
        }
        let below_end = end.is_empty() || lo < end;
        let above_start = hi.is_none_or(|h| h >= start);
        below_end && above_start
    }

    /// Bytes this handle accounts for (a reference: an estimate, half its parent).
    pub fn size(&self) -> u64 {
        let size = self.file.meta().file_size;
        if self.reference.is_some() {
            size / 2
        } else {
            size
        }
    }
}

impl Drop for StoreFileHandle {
    fn drop(&mut self) {
        if !self.obsolete.load(Ordering::Acquire) {
            return;
        }
        if self.reference.is_none() {
            if let Some(cache) = &self.cache {
                cache.evict_file(self.file.file_id());
            }
        }
        if let Err(e) = self.fs.delete(&self.own_path) {
            tracing::warn!(path = %self.own_path.display(), error = %e, "could not delete a compacted store file; it is removed on the next open");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_with_and_without_a_writer_tag_parse() {
        assert_eq!(parse_number("00000000000000a1.sf"), Some((0xa1, "sf")));
        let tagged = tagged_store_file_name(0xa1, 0x5f3c_0e9a_7b21_d4c8);
        assert_eq!(tagged, "00000000000000a1-5f3c0e9a7b21d4c8.sf");
        assert_eq!(parse_number(&tagged), Some((0xa1, "sf")));
        assert_eq!(
            parse_number(&tagged_marker_file_name(3, 7)),
            Some((3, "compaction"))
        );
        assert_eq!(
            parse_number(&format!("{tagged}.tmp")),
            Some((0xa1, "sf.tmp"))
        );
        // Two writers never share a name.
        assert_ne!(tagged_store_file_name(1, 1), tagged_store_file_name(1, 2));
        assert_eq!(parse_number("00000000000000a1-xyz.sf"), None);
        assert_eq!(parse_number("a1.sf"), None);
    }
    use crate::fs::LocalFs;

    /// Found by the `store_refs` fuzz target: a marker whose body ends in an empty line read
    /// back as the names `["rc=81cc2ce0", ""]`, and writing those names gave a marker that
    /// read back without the empty one.
    #[test]
    fn empty_lines_of_a_marker_name_no_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fs: FsRef = Arc::new(LocalFs);
        let body = b"rc=81cc2ce0\n\n";
        let mut text = body.to_vec();
        text.extend_from_slice(format!("\ncrc={:08x}\n", crc32c::crc32c(body)).as_bytes());
        let path = dir.path().join("0000000000000001.compaction");
        std::fs::write(&path, &text).expect("write");
        let marker = read_marker(&fs, &path).expect("read").expect("intact");
        assert_eq!(marker.inputs, vec!["rc=81cc2ce0".to_string()]);
        assert_eq!(marker.outputs, None);
        let again = dir.path().join("0000000000000002.compaction");
        write_marker(&fs, &again, &marker).expect("write marker");
        assert_eq!(read_marker(&fs, &again).expect("read"), Some(marker));
    }

    /// Found by the `store_refs` fuzz target: a name ending in '\r' lost it when read
    /// (`str::lines`), so the names read did not write back as the same marker.
    #[test]
    fn a_carriage_return_stays_part_of_a_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fs: FsRef = Arc::new(LocalFs);
        for outputs in [None, Some(vec!["c\r".to_string()])] {
            let marker = Marker {
                inputs: vec!["a\r\r".to_string(), "b".to_string()],
                outputs,
            };
            let path = dir.path().join("0000000000000001.compaction");
            write_marker(&fs, &path, &marker).expect("write marker");
            assert_eq!(read_marker(&fs, &path).expect("read"), Some(marker));
        }
    }

    /// Version 2 names the outputs; a line that is neither an input nor an output makes the
    /// marker damaged (every file is kept).
    #[test]
    fn a_version_2_marker_names_inputs_and_outputs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fs: FsRef = Arc::new(LocalFs);
        let path = dir.path().join("0000000000000003.compaction");
        let marker = Marker {
            inputs: vec![store_file_name(1), store_file_name(2)],
            outputs: Some(vec![store_file_name(3), store_file_name(4)]),
        };
        write_marker(&fs, &path, &marker).expect("write marker");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with("cellar-compaction v2\nin 0000000000000001.sf\n"),
            "{text}"
        );
        assert_eq!(read_marker(&fs, &path).expect("read"), Some(marker));
        let body = "cellar-compaction v2\nin a\nsideways b";
        let text = format!("{body}\ncrc={:08x}\n", crc32c::crc32c(body.as_bytes()));
        std::fs::write(&path, text).expect("write");
        assert_eq!(read_marker(&fs, &path).expect("read"), None);
    }
}
