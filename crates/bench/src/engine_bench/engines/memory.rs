//! A sorted map behind a lock: an engine for testing the harness itself (tests only).

use crate::engine_bench::args::EngineKind;
use crate::engine_bench::engines::{CacheCounters, Engine, Session};
use crate::engine_bench::error::{BenchError, Result};
use std::collections::BTreeMap;
use std::sync::RwLock;

/// Entries in memory; reports itself as Cellar so results have an engine name.
#[derive(Default)]
pub struct MemoryEngine {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemoryEngine {
    pub fn entries(&self) -> usize {
        self.map.read().map_or(0, |m| m.len())
    }
}

fn poisoned<T>(_: T) -> BenchError {
    BenchError::new("memory engine lock poisoned")
}

impl Engine for MemoryEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Cellar
    }
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(self))
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn wait_for_background(&self) -> Result<()> {
        Ok(())
    }
    fn cache_counters(&self) -> Option<CacheCounters> {
        None
    }
    fn stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([("entries".to_string(), self.entries() as u64)])
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

impl Session for &MemoryEngine {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map
            .write()
            .map_err(poisoned)?
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.map.read().map_err(poisoned)?.get(key).map(Vec::len))
    }
    fn scan(&mut self, start: &[u8], count: usize) -> Result<(u64, u64)> {
        let map = self.map.read().map_err(poisoned)?;
        let mut out = (0, 0);
        for (k, v) in map.range(start.to_vec()..).take(count) {
            out.0 += 1;
            out.1 += (k.len() + v.len()) as u64;
        }
        Ok(out)
    }
}
