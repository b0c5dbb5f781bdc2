//! UCX stays loaded once it has been loaded. In a test binary of its own: nothing else in the
//! process may hold UCX while this one checks that its last user let go without unloading it.

use cellar_ucx::{Context, Ucx};

/// The UCX libraries mapped into this process.
fn mapped() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let mut libs: Vec<String> = maps
        .lines()
        .filter_map(|l| l.rsplit(' ').next())
        .filter(|path| path.contains("/libuc"))
        .map(str::to_string)
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

/// A client that connects, drops its connections and connects again must not unload UCX in
/// between: `libucs` outlives `libucp`, and `libucp`'s constructor and destructor edit
/// `libucs`'s lists without a lock while other threads may be inside UCX.
#[test]
fn ucx_stays_loaded_after_its_last_user_is_gone() {
    {
        let ucx = Ucx::load_from(&["libucp.so.0"]).unwrap_or_else(|e| panic!("{e}"));
        let ctx = Context::new(&ucx).expect("context");
        let worker = ctx.worker().expect("worker");
        worker.address().expect("address");
    }
    let libs = mapped();
    assert!(
        libs.iter().any(|l| l.contains("libucp.so")),
        "libucp was unloaded when its last context was dropped; mapped: {libs:?}"
    );
    // And the process-wide UCX is one library, loaded once.
    let a = Ucx::load().expect("load");
    let b = Ucx::load().expect("load again");
    assert!(std::sync::Arc::ptr_eq(&a, &b), "one UCX per process");
}
