//! `cellar verify DIR`: reads every file of a region and checks it, changing nothing.

use cellar_model::Result;
use cellar_storage::block_cache::Priority;
use cellar_storage::fs::{FsRef, LocalFs};
use cellar_storage::region::descriptor;
use cellar_storage::region::store_files::{next_file_id, Reference};
use cellar_storage::storefile::StoreFile;
use std::path::Path;

pub fn run(dir: &Path) -> Result<()> {
    let fs: FsRef = LocalFs::shared();
    let (info, schema) = descriptor::read(fs.as_ref(), dir)?;
    println!(
        "region {} of table '{}', rows [{:?}, {:?})",
        info.id,
        schema.name,
        String::from_utf8_lossy(&info.start_key),
        String::from_utf8_lossy(&info.end_key)
    );
    let (mut files, mut cells, mut bytes) = (0u64, 0u64, 0u64);
    for family in &schema.families {
        let fdir = dir.join(&family.name);
        if !fs.exists(&fdir)? {
            println!("  family {}: no files", family.name);
            continue;
        }
        for name in fs.list(&fdir)? {
            let path = fdir.join(&name);
            if name.ends_with(".sf") {
                let f = StoreFile::open(&fs, &path, next_file_id(), None, Priority::Normal)?;
                f.verify()?;
                let m = f.meta();
                println!(
                    "  {}/{name}: level {}, {} cells ({} deletes), {} blocks, {} bytes, {}, bloom {}, max seq {}: ok",
                    family.name, m.level, m.cell_count, m.delete_count, m.data_block_count, m.file_size, m.compression, m.bloom, m.max_seq
                );
                files += 1;
                cells += m.cell_count;
                bytes += m.file_size;
            } else if name.ends_with(".ref") {
                let r = Reference::read(&fs, &path)?;
                println!(
                    "  {}/{name}: reference to {}: ok",
                    family.name,
                    r.parent.display()
                );
            } else {
                println!("  {}/{name}: (not checked)", family.name);
            }
        }
    }
    let wal = dir.join("wal");
    if fs.exists(&wal)? {
        let segments = fs.list(&wal)?;
        println!(
            "  wal: {} segment(s) (replayed and checked when the region opens)",
            segments.len()
        );
    }
    println!("{files} store files, {cells} cells, {bytes} bytes: all checksums match");
    Ok(())
}
