//! Writes the seed corpora under `fuzz/corpus/<target>/` (replacing seeds of the same name;
//! inputs the fuzzer added are left alone).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let mut n = 0;
    for (target, name, bytes) in cellar_fuzz_common::seeds::all() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        n += 1;
    }
    println!("wrote {n} seeds under {}", root.display());
    Ok(())
}
