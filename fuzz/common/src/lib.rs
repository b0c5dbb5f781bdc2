//! What Cellar's fuzz targets run. Each function of [`targets`] is one libFuzzer target
//! (`fuzz/fuzz_targets/<name>.rs` calls it), so the same code also runs on stable in this
//! crate's tests, which replay the checked-in corpora and regression inputs.
//!
//! Every target checks three things: no panic on any input; no allocation sized from the input
//! beyond [`alloc_guard::MAX_ALLOCATION`] (the guard aborts, which libFuzzer records as a crash
//! even in builds without a sanitizer); and, where Cellar has an encoder for what it decoded, a
//! round trip (decode → encode → decode gives the same value).

pub mod alloc_guard;
pub mod fixup;
pub mod memfs;
pub mod seeds;
pub mod shell;
pub mod targets;

#[global_allocator]
static ALLOC: alloc_guard::LimitedAlloc = alloc_guard::LimitedAlloc;
