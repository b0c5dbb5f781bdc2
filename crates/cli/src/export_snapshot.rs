//! `cellar export-snapshot`: copies a snapshot and the store files it names from one root to
//! another (local disk or HDFS), where the other cluster's `list_snapshots` shows it and
//! `clone_snapshot` makes a table of it (HBase's ExportSnapshot). The servers of either root
//! may be running: the source's files are read wherever they are (in `data/` or, once the
//! table stopped using them, in the archive), and they are written to the destination's
//! archive, which its cleaner leaves alone while the copy is marked `importing`.
//!
//! Order, so that an interrupted export leaves no snapshot behind that lacks a file: the
//! manifest is written as `importing` first (the destination's cleaner keeps what it names);
//! each file is copied to a temporary name, synced and renamed; the manifest proper is written
//! last, atomically; then `importing` goes. Running the same export again after an
//! interruption skips the files already there.

use cellar_server::config::Root;
use cellar_server::snapshot::Manifest;
use cellar_storage::fs::{archive_root, tmp_path, ArchivingFs, FileSystem, FsRef, HdfsFs, LocalFs};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The snapshot to export.
    #[arg(long)]
    snapshot: String,
    /// The root that holds it: a standalone server's data directory or a cluster's root, as a
    /// path, file:///PATH or hdfs://HOST:PORT/PATH.
    #[arg(long, value_name = "ROOT")]
    root: String,
    /// The root to copy it to (same forms); another server or cluster that serves from it
    /// then lists the snapshot and can clone it.
    #[arg(long, value_name = "ROOT")]
    to: String,
}

/// A root's file system and its directory there.
fn open_root(given: &str, what: &str) -> Result<(FsRef, PathBuf), String> {
    let url = if given.contains("://") {
        given.to_string()
    } else {
        let abs = std::path::absolute(given).map_err(|e| format!("{what} {given}: {e}"))?;
        format!("file://{}", abs.display())
    };
    match Root::parse(&url).map_err(|e| format!("{what}: {e}"))? {
        Root::Local(path) => Ok((LocalFs::shared(), path)),
        Root::Hdfs { namenode, path } => {
            let fs = HdfsFs::connect(&namenode)
                .map_err(|e| format!("{what}: cannot reach HDFS at {namenode}: {e}"))?;
            Ok((Arc::new(fs), path))
        }
    }
}

const CHUNK: usize = 8 << 20;

/// Copies `from` (read through `src`) to `to` on `dst`, whole or not at all.
fn copy_file(
    src: &dyn FileSystem,
    from: &Path,
    dst: &dyn FileSystem,
    to: &Path,
) -> Result<u64, String> {
    let err =
        |e: cellar_model::Error| format!("copying {} to {}: {e}", from.display(), to.display());
    let input = src.open(from).map_err(err)?;
    if let Some(dir) = to.parent() {
        dst.create_dir_all(dir).map_err(err)?;
    }
    let tmp = tmp_path(to);
    let mut out = dst.create(&tmp).map_err(err)?;
    let len = input.len();
    let mut at = 0u64;
    while at < len {
        let n = usize::try_from((len - at).min(CHUNK as u64)).unwrap_or(CHUNK);
        let bytes = input.read_at(at, n).map_err(err)?;
        if bytes.is_empty() {
            return Err(format!("{} ended at byte {at} of {len}", from.display()));
        }
        out.append(&bytes).map_err(err)?;
        at += bytes.len() as u64;
    }
    out.sync().map_err(err)?;
    drop(out);
    dst.rename(&tmp, to).map_err(err)?;
    Ok(len)
}

pub fn run(args: Args) -> Result<(), String> {
    let started = Instant::now();
    let (src_inner, src_root) = open_root(&args.root, "--root")?;
    // Reads find a file in the archive once its table stopped using it.
    let src: FsRef = Arc::new(ArchivingFs::new(src_inner, &src_root));
    let (dst, dst_root) = open_root(&args.to, "--to")?;
    cellar_server::snapshot::check_name(&args.snapshot).map_err(|e| e.to_string())?;
    let manifest = Manifest::read(&*src, &src_root, &args.snapshot)
        .map_err(|e| format!("reading snapshot '{}': {e}", args.snapshot))?
        .ok_or_else(|| {
            format!(
                "there is no snapshot '{}' in {} (list_snapshots lists them)",
                args.snapshot, args.root
            )
        })?;
    if Manifest::read(&*dst, &dst_root, &args.snapshot)
        .map_err(|e| format!("--to: {e}"))?
        .is_some()
    {
        return Err(format!(
            "{} already has a snapshot '{}'; delete it there first",
            args.to, args.snapshot
        ));
    }
    let target = manifest.rerooted(&src_root, &dst_root);
    target
        .write_importing(&*dst, &dst_root)
        .map_err(|e| format!("--to: {e}"))?;
    let files: BTreeSet<PathBuf> = manifest
        .regions
        .iter()
        .flat_map(|r| r.files.iter().map(|f| f.path.clone()))
        .collect();
    let (mut copied, mut skipped, mut bytes) = (0usize, 0usize, 0u64);
    let total = files.len();
    for (i, from) in files.iter().enumerate() {
        let rel = from.strip_prefix(src_root.join("data")).map_err(|_| {
            format!(
                "the snapshot names {} outside {}/data",
                from.display(),
                src_root.display()
            )
        })?;
        let to = archive_root(&dst_root).join(rel);
        let there = dst_root.join("data").join(rel);
        let have = |p: &Path| dst.exists(p).map_err(|e| format!("--to: {e}"));
        if have(&to)? || have(&there)? {
            skipped += 1;
        } else {
            bytes += copy_file(&*src, from, &*dst, &to)?;
            copied += 1;
        }
        eprint!(
            "\rexport-snapshot: {}/{total} files, {:.1} MiB copied",
            i + 1,
            bytes as f64 / 1048576.0
        );
    }
    if total > 0 {
        eprintln!();
    }
    target
        .write(&*dst, &dst_root)
        .map_err(|e| format!("--to: writing the manifest: {e}"))?;
    target
        .imported(&*dst, &dst_root)
        .map_err(|e| format!("--to: {e}"))?;
    println!(
        "exported snapshot {} of table {}: {} regions, {copied} files copied ({bytes} bytes), {skipped} already there, to {} in {:.1}s",
        manifest.name,
        manifest.table,
        manifest.regions.len(),
        args.to,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
