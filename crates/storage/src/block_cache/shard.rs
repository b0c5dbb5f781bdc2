//! One shard of the block cache: a segmented LRU over a slab of entries.
//!
//! Three recency lists, each doubly linked through slab indices (O(1) move and unlink):
//! - probation: blocks seen once, the first evicted (a one-touch scan churns only here);
//! - protected: blocks hit again while cached, bounded to half the shard; overflow is
//!   demoted to the head of probation rather than dropped, giving it one more chance;
//! - in-memory: blocks of in-memory families, bounded to a quarter of the shard and evicted
//!   only by other in-memory blocks (or, last, to fit an in-memory insert).
//!
//! This is HBase's single / multi / memory split. Not thread-safe: the cache wraps each shard
//! in a mutex.

use super::{BlockKey, BlockKeyHasher, Priority};
use bytes::Bytes;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    Probation = 0,
    Protected = 1,
    InMemory = 2,
}

struct Entry {
    key: BlockKey,
    block: Bytes,
    charge: u64,
    segment: Segment,
    prev: u32,
    next: u32,
}

/// Head is the most recently used end, tail the least.
#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    bytes: u64,
}

const EMPTY_LIST: List = List {
    head: NIL,
    tail: NIL,
    bytes: 0,
};

/// Counters of one shard, summed by the cache.
#[derive(Default, Clone, Copy)]
pub(super) struct ShardStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
    pub used: u64,
}

pub(super) struct Shard {
    map: HashMap<BlockKey, u32, BuildHasherDefault<BlockKeyHasher>>,
    slab: Vec<Entry>,
    free: Vec<u32>,
    lists: [List; 3],
    capacity: u64,
    protected_cap: u64,
    in_memory_cap: u64,
    stats: ShardStats,
}

impl Shard {
    pub(super) fn new(capacity: u64) -> Shard {
        Shard {
            map: HashMap::default(),
            slab: Vec::new(),
            free: Vec::new(),
            lists: [EMPTY_LIST; 3],
            capacity,
            protected_cap: capacity / 2,
            in_memory_cap: capacity / 4,
            stats: ShardStats::default(),
        }
    }

    pub(super) fn stats(&self) -> ShardStats {
        self.stats
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next, seg, charge) = {
            let e = at(&self.slab, i);
            (e.prev, e.next, e.segment, e.charge)
        };
        let list = list(&mut self.lists, seg);
        if prev == NIL {
            list.head = next;
        } else {
            at_mut(&mut self.slab, prev).next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            at_mut(&mut self.slab, next).prev = prev;
        }
        list.bytes -= charge;
    }

    fn push_head(&mut self, seg: Segment, i: u32) {
        let list = list(&mut self.lists, seg);
        let old_head = list.head;
        let e = at_mut(&mut self.slab, i);
        e.segment = seg;
        e.prev = NIL;
        e.next = old_head;
        let charge = e.charge;
        if old_head != NIL {
            at_mut(&mut self.slab, old_head).prev = i;
        }
        list.head = i;
        if list.tail == NIL {
            list.tail = i;
        }
        list.bytes += charge;
    }

    /// Removes entry `i` entirely, freeing its slot.
    fn remove(&mut self, i: u32) {
        self.unlink(i);
        let e = at_mut(&mut self.slab, i);
        self.map.remove(&e.key);
        self.stats.used -= e.charge;
        e.block = Bytes::new();
        self.free.push(i);
    }

    fn evict_tail(&mut self, seg: Segment) -> bool {
        let tail = list(&mut self.lists, seg).tail;
        if tail == NIL {
            return false;
        }
        self.remove(tail);
        self.stats.evictions += 1;
        true
    }

    /// Whether the block is cached; counts nothing and moves nothing.
    pub(super) fn contains(&self, key: &BlockKey) -> bool {
        self.map.contains_key(key)
    }

    pub(super) fn get(&mut self, key: &BlockKey) -> Option<Bytes> {
        let Some(&i) = self.map.get(key) else {
            self.stats.misses += 1;
            return None;
        };
        self.stats.hits += 1;
        let seg = at(&self.slab, i).segment;
        self.unlink(i);
        match seg {
            Segment::Probation | Segment::Protected => {
                self.push_head(Segment::Protected, i);
                // Keep protected within its share by demoting its coldest blocks.
                while list(&mut self.lists, Segment::Protected).bytes > self.protected_cap {
                    let t = list(&mut self.lists, Segment::Protected).tail;
                    if t == NIL || t == i {
                        break;
                    }
                    self.unlink(t);
                    self.push_head(Segment::Probation, t);
                }
            }
            Segment::InMemory => self.push_head(Segment::InMemory, i),
        }
        Some(at(&self.slab, i).block.clone())
    }

    pub(super) fn insert(&mut self, key: BlockKey, block: Bytes, charge: u64, prio: Priority) {
        if let Some(&i) = self.map.get(&key) {
            self.remove(i);
        }
        let (seg, limit) = match prio {
            Priority::Normal => (Segment::Probation, self.capacity),
            Priority::InMemory => (Segment::InMemory, self.in_memory_cap),
        };
        if charge > limit {
            return;
        }
        let entry = Entry {
            key,
            block,
            charge,
            segment: seg,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                *at_mut(&mut self.slab, i) = entry;
                i
            }
            None => {
                self.slab.push(entry);
                (self.slab.len() - 1) as u32
            }
        };
        self.map.insert(key, i);
        self.push_head(seg, i);
        self.stats.used += charge;
        self.stats.inserts += 1;
        while list(&mut self.lists, Segment::InMemory).bytes > self.in_memory_cap {
            self.evict_tail(Segment::InMemory);
        }
        // Ordinary blocks never evict in-memory ones: the new block itself is in probation,
        // so the first two lists always free enough for it.
        while self.stats.used > self.capacity {
            let freed = self.evict_tail(Segment::Probation)
                || self.evict_tail(Segment::Protected)
                || (prio == Priority::InMemory && self.evict_tail(Segment::InMemory));
            if !freed {
                break;
            }
        }
    }

    /// Drops every block of `file_id` (not counted as evictions).
    pub(super) fn evict_file(&mut self, file_id: u64) {
        let doomed: Vec<u32> = self
            .map
            .iter()
            .filter(|(k, _)| k.file_id == file_id)
            .map(|(_, &i)| i)
            .collect();
        for i in doomed {
            self.remove(i);
        }
    }
}

/// The list of segment `seg`.
#[inline]
fn list(lists: &mut [List; 3], seg: Segment) -> &mut List {
    let [probation, protected, in_memory] = lists;
    match seg {
        Segment::Probation => probation,
        Segment::Protected => protected,
        Segment::InMemory => in_memory,
    }
}

/// Entry `i` of the slab.
#[inline]
#[allow(
    clippy::indexing_slicing,
    reason = "slab indices are slots the shard handed out itself (map values and list links), never bytes of a block, and the slab never shrinks"
)]
fn at(slab: &[Entry], i: u32) -> &Entry {
    &slab[i as usize]
}

/// Entry `i` of the slab, to change.
#[inline]
#[allow(
    clippy::indexing_slicing,
    reason = "slab indices are slots the shard handed out itself (map values and list links), never bytes of a block, and the slab never shrinks"
)]
fn at_mut(slab: &mut [Entry], i: u32) -> &mut Entry {
    &mut slab[i as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> BlockKey {
        BlockKey {
            file_id: 1,
            offset: n,
        }
    }

    fn block(len: usize) -> Bytes {
        Bytes::from(vec![0u8; len])
    }

    /// The lists are consistent with the map and the byte counters.
    fn check(s: &Shard) {
        let mut total = 0;
        let mut count = 0;
        for (seg, list) in s.lists.iter().enumerate() {
            let mut bytes = 0;
            let mut i = list.head;
            let mut prev = NIL;
            while i != NIL {
                let e = &s.slab[i as usize];
                assert_eq!(e.segment as usize, seg);
                assert_eq!(e.prev, prev);
                assert_eq!(s.map.get(&e.key), Some(&i));
                bytes += e.charge;
                count += 1;
                prev = i;
                i = e.next;
            }
            assert_eq!(list.tail, prev);
            assert_eq!(list.bytes, bytes);
            total += bytes;
        }
        assert_eq!(count, s.map.len());
        assert_eq!(total, s.stats.used);
        assert!(s.stats.used <= s.capacity);
        assert!(s.lists[Segment::InMemory as usize].bytes <= s.in_memory_cap);
    }

    #[test]
    fn lists_stay_consistent_under_mixed_operations() {
        let mut s = Shard::new(10_000);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = key(x % 64);
            match x % 7 {
                0..=2 => {
                    s.get(&k);
                }
                3 => s.insert(
                    k,
                    block((x % 900) as usize),
                    100 + x % 900,
                    Priority::InMemory,
                ),
                4 => s.evict_file(if x.is_multiple_of(2) { 1 } else { 2 }),
                _ => s.insert(
                    k,
                    block((x % 900) as usize),
                    100 + x % 900,
                    Priority::Normal,
                ),
            }
            check(&s);
        }
    }

    #[test]
    fn second_hit_promotes_and_probation_is_evicted_first() {
        let mut s = Shard::new(1_000);
        s.insert(key(1), block(1), 100, Priority::Normal);
        assert!(s.get(&key(1)).is_some());
        assert_eq!(s.slab[s.map[&key(1)] as usize].segment, Segment::Protected);
        for n in 2..100 {
            s.insert(key(n), block(1), 100, Priority::Normal);
        }
        assert!(
            s.get(&key(1)).is_some(),
            "protected block survived the scan"
        );
        check(&s);
    }

    #[test]
    fn oversized_blocks_are_not_cached() {
        let mut s = Shard::new(1_000);
        s.insert(key(1), block(1), 1_001, Priority::Normal);
        s.insert(key(2), block(1), 251, Priority::InMemory);
        assert!(s.get(&key(1)).is_none());
        assert!(s.get(&key(2)).is_none());
        assert_eq!(s.stats.inserts, 0);
    }
}
