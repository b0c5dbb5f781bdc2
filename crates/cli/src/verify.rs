//! `cellar verify DIR`: reads every file of a region and checks it, changing nothing.

use cellar_model::Result;
use cellar_storage::fs::LocalFs;
use cellar_storage::region::{FileCheck, RegionDir};
use std::path::Path;

pub fn run(dir: &Path) -> Result<()> {
    let region = RegionDir::open_read_only(LocalFs::shared(), dir)?;
    let (info, schema) = (region.info(), region.schema());
    println!(
        "region {} of table '{}', rows [{:?}, {:?})",
        info.id,
        schema.name,
        String::from_utf8_lossy(&info.start_key),
        String::from_utf8_lossy(&info.end_key)
    );
    let (mut files, mut cells, mut bytes) = (0u64, 0u64, 0u64);
    for family in &schema.families {
        let Some(names) = region.store_files(&family.name)? else {
            println!("  family {}: no files", family.name);
            continue;
        };
        for name in names {
            match region.check_file(&family.name, &name)? {
                FileCheck::StoreFile(m) => {
                    println!(
                        "  {}/{name}: level {}, {} cells ({} deletes), {} blocks, {} bytes, {}, bloom {}, max seq {}: ok",
                        family.name, m.level, m.cell_count, m.delete_count, m.data_block_count, m.file_size, m.compression, m.bloom, m.max_seq
                    );
                    files += 1;
                    cells += m.cell_count;
                    bytes += m.file_size;
                }
                FileCheck::Reference { parent } => println!(
                    "  {}/{name}: reference to {}: ok",
                    family.name,
                    parent.display()
                ),
                FileCheck::NotChecked => println!("  {}/{name}: (not checked)", family.name),
            }
        }
    }
    if let Some(segments) = region.wal_segments()? {
        println!("  wal: {segments} segment(s) (replayed and checked when the region opens)");
    }
    println!("{files} store files, {cells} cells, {bytes} bytes: all checksums match");
    Ok(())
}
