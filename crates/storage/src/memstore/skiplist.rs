//! The memstore's sorted structure: a skiplist whose nodes live in an [`Arena`], with one
//! writer at a time and lock-free readers (LevelDB's model).
//!
//! HOT PATH: `insert` runs once per cell and the search loop once per seek. Neither may
//! allocate on the heap (nodes come from the arena), and readers must never lock or wait.
//!
//! Node layout in the arena (8-aligned, one allocation per cell):
//!
//! ```text
//! key_len: u32 | value_len: u32 | height: u32 | pad: u32 | column_last: *const Node
//!   | next: [AtomicPtr<Node>; height] | key | value
//! ```
//!
//! `column_last` is the last node of the node's column (row and qualifier) when it was
//! linked: a seek past the column's other versions jumps there first, so skipping a hot
//! column's hundreds of versions is one step, not a climb through the towers of its nodes.
//!
//! Invariants:
//! - a node is written completely (header, every `next`, key, value) before it is published,
//!   and never written again except for its `next` pointers, which only the writer stores;
//! - the writer publishes a node level by level, bottom up, each with a `Release` store of
//!   the predecessor's `next`; readers load every `next` with `Acquire`, so a reader that can
//!   reach a node sees it fully initialised;
//! - at every level the linked nodes are sorted by [`compare_keys`]; level `l + 1` lists a
//!   subset of level `l`;
//! - nodes are never unlinked or freed before the list drops, so a node pointer obtained from
//!   a list is valid as long as that list is;
//! - a node's `column_last` is a node of its column at or after it (itself when it was linked
//!   last of its column). Versions linked later after that node make it stale, never wrong:
//!   the seek goes on forward from it.
//!
//! Thread-safety: `insert` takes the writer mutex; every other method only does atomic loads
//! and reads of published, immutable bytes.

use super::arena::Arena;
use super::row_index::{RowIndex, RowIndexTables};
use cellar_model::key::{compare_parsed, KeyRef, KEY_TRAILER_LEN};
use parking_lot::Mutex;
use std::cmp::Ordering;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Tallest tower. With p = 1/4 this keeps searches logarithmic up to ~16M entries, far beyond
/// any memstore's flush size.
pub(crate) const MAX_HEIGHT: usize = 12;

/// A node's fixed header; its tower, key and value follow it in the same allocation.
#[repr(C)]
struct Node {
    key_len: u32,
    value_len: u32,
    height: u32,
    _pad: u32,
    /// See the module's doc; written once, before the node is published.
    column_last: *const Node,
    /// Zero-sized marker: the tower starts here, `AtomicPtr`-aligned.
    next: [AtomicPtr<Node>; 0],
}

const HEADER_LEN: usize = size_of::<Node>();

/// Whether two keys are of one column: equal but for the trailer (timestamp, type, sequence
/// id), the row's length prefix included.
fn same_column(a: &[u8], b: &[u8]) -> bool {
    match (
        a.len().checked_sub(KEY_TRAILER_LEN),
        b.len().checked_sub(KEY_TRAILER_LEN),
    ) {
        (Some(x), Some(y)) => a.get(..x) == b.get(..y),
        _ => false,
    }
}

/// The search key, parsed once per search instead of once per comparison.
struct Target<'a> {
    raw: &'a [u8],
    parsed: Option<KeyRef<'a>>,
}

impl<'a> Target<'a> {
    fn new(raw: &'a [u8]) -> Target<'a> {
        Target {
            raw,
            parsed: KeyRef::parse(raw),
        }
    }

    /// Exactly `compare_keys(node_key, self.raw)`.
    #[inline]
    fn compare(&self, node_key: &[u8]) -> Ordering {
        match (KeyRef::parse(node_key), &self.parsed) {
            (Some(node), Some(target)) => compare_parsed(&node, target),
            _ => node_key.cmp(self.raw),
        }
    }
}

/// State only the writer touches.
struct Writer {
    arena: Arena,
    /// The row index's tables.
    rows: RowIndexTables<Node>,
    /// xorshift64* state for tower heights.
    rng: u64,
    /// Where the last insert linked its node.
    splice: Splice,
}

/// The search path of the last key inserted, kept from one insert to the next: a key that
/// sorts after it (sequential row keys, a row's cells) is searched for from there instead of
/// from the head (RocksDB's skip list keeps one too).
struct Splice {
    /// `prev[l]`: a node linked at level `l` (null: the head) whose key is at or below `last`'s.
    prev: [*const Node; MAX_HEIGHT],
    /// The node linked last (null before the first insert).
    last: *const Node,
}

// SAFETY: the pointers are nodes of the list that owns this `Splice` (through its writer
// mutex); nodes are never unlinked or freed before the list drops (invariant 3), and only the
// writer, holding the mutex, reads them. Moving them with the list is as safe as moving the
// list.
unsafe impl Send for Splice {}

impl Writer {
    /// A height with P(h > k) = 4^-k, capped at [`MAX_HEIGHT`].
    fn random_height(&mut self) -> usize {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        let mut bits = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
        let mut height = 1;
        while height < MAX_HEIGHT && bits & 3 == 0 {
            height += 1;
            bits >>= 2;
        }
        height
    }
}

/// A sorted set of (key, value) entries in [`compare_keys`](cellar_model::key::compare_keys)
/// order.
pub(crate) struct SkipList {
    /// The head's tower: `head[l]` is the first node of level `l`.
    head: [AtomicPtr<Node>; MAX_HEIGHT],
    /// Levels in use (1..=MAX_HEIGHT). Relaxed: a reader that sees a raised height early
    /// finds a null or a fully published node at the new levels, both fine.
    height: AtomicUsize,
    len: AtomicUsize,
    used_bytes: AtomicUsize,
    reserved_bytes: AtomicUsize,
    /// Row → node of the row's smallest key, for seeks to a row's start.
    rows: RowIndex<Node>,
    /// False once a key that does not parse was inserted: such keys order by raw bytes, and
    /// the index, which knows rows, could not say what sorts first then.
    rows_usable: AtomicBool,
    writer: Mutex<Writer>,
}

impl SkipList {
    /// An empty list allocating arena chunks of `chunk_size` bytes; allocates nothing yet.
    pub(crate) fn new(chunk_size: usize) -> SkipList {
        let (rows, row_tables) = RowIndex::new();
        SkipList {
            head: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            used_bytes: AtomicUsize::new(0),
            reserved_bytes: AtomicUsize::new(0),
            rows,
            rows_usable: AtomicBool::new(true),
            writer: Mutex::new(Writer {
                arena: Arena::new(chunk_size),
                rows: row_tables,
                rng: 0x9e37_79b9_7f4a_7c15,
                splice: Splice {
                    prev: [ptr::null(); MAX_HEIGHT],
                    last: ptr::null(),
                },
            }),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    pub(crate) fn used_bytes(&self) -> usize {
        self.used_bytes.load(AtomicOrdering::Relaxed)
    }

    pub(crate) fn reserved_bytes(&self) -> usize {
        self.reserved_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Copies `key` and `value` into the arena and links a node for them.
    ///
    /// Panics if `key` or `value` is 4 GiB or longer. `key` must not already be present.
    pub(crate) fn insert(&self, key: &[u8], value: &[u8]) {
        self.insert_all([(key, value)]);
    }

    /// [`SkipList::insert`] of several entries under one hold of the writer lock. An entry
    /// whose key follows the last key inserted (by this call or the one before) is searched
    /// for from where that one was linked instead of from the head: a row's cells, sorted,
    /// and rows written in key order cost one full search in all, not one each (they land
    /// next to each other, so each later search is a few compares against nodes in cache).
    pub(crate) fn insert_all<'k>(&self, entries: impl IntoIterator<Item = (&'k [u8], &'k [u8])>) {
        let mut guard = self.writer.lock();
        let writer = &mut *guard;
        // Null stands for the head. Invariant between entries: `prev[l]` is a node linked at
        // level `l` (or the head) whose key is at or below the last key inserted.
        let mut prev = writer.splice.prev;
        let mut last_node = writer.splice.last;
        let mut last: Option<&[u8]> = NonNull::new(last_node.cast_mut()).map(|n| self.node_key(n));
        for (key, value) in entries {
            let target = Target::new(key);
            let after_last = last.is_some_and(|l| target.compare(l) == Ordering::Less);
            if after_last {
                self.advance_to(&target, &mut prev);
            } else {
                self.find_greater_or_equal(&target, Some(&mut prev));
            }
            debug_assert!(
                NonNull::new(self.next(prev[0], 0))
                    .is_none_or(|n| target.compare(self.node_key(n)) != Ordering::Equal),
                "memstore: duplicate key inserted"
            );
            let node = self.link(writer, key, value, &mut prev);
            // A key after a smaller one of its own row cannot be its row's smallest.
            let follows_in_row = after_last
                && matches!((last.and_then(KeyRef::parse), &target.parsed), (Some(l), Some(t)) if l.row() == t.row());
            if !follows_in_row {
                self.index_row(writer, &target, node);
            }
            last = Some(key);
            last_node = node.as_ptr().cast_const();
        }
        writer.splice = Splice {
            prev,
            last: last_node,
        };
    }

    /// Moves each `prev[l]` forward to the last node at level `l` below `target`, given that
    /// every `prev[l]` is already below it. Returns the first node ≥ `target` it saw: with
    /// writers running, `prev[0]`'s successor read again later may be a node linked since,
    /// below `target`.
    #[allow(
        clippy::indexing_slicing,
        reason = "levels are below the list's height, at most MAX_HEIGHT (`random_height` caps it), the length of `prev`"
    )]
    fn advance_to(
        &self,
        target: &Target<'_>,
        prev: &mut [*const Node; MAX_HEIGHT],
    ) -> Option<NonNull<Node>> {
        let height = self.height.load(AtomicOrdering::Relaxed);
        // The node found ≥ target one level up: not compared twice.
        let mut known_ge: *const Node = ptr::null();
        // Where the level above stopped, if it moved: that node is further than `prev[l]`.
        let mut moved_above: Option<*const Node> = None;
        for level in (0..height).rev() {
            let mut x = moved_above.unwrap_or(prev[level]);
            let start = x;
            loop {
                let next = self.next(x, level);
                let advance = NonNull::new(next).is_some_and(|n| {
                    next.cast_const() != known_ge
                        && target.compare(self.node_key(n)) == Ordering::Less
                });
                if !advance {
                    known_ge = next.cast_const();
                    break;
                }
                x = next;
            }
            moved_above = (x != start || moved_above.is_some()).then_some(x);
            prev[level] = x;
        }
        NonNull::new(known_ge.cast_mut())
    }

    /// Records a just-linked `node` (key `target`) in the row index if it is its row's
    /// smallest key so far; a key that does not parse turns the index off.
    fn index_row(&self, writer: &mut Writer, target: &Target<'_>, node: NonNull<Node>) {
        let Some(key) = target.parsed else {
            self.rows_usable.store(false, AtomicOrdering::Relaxed);
            return;
        };
        let row = key.row();
        let hash = self.rows.hash(row);
        let key_of = |n: *mut Node| NonNull::new(n).map(|n| self.node_key(n));
        self.rows.record(
            &mut writer.rows,
            hash,
            node.as_ptr(),
            |old| {
                key_of(old)
                    .and_then(KeyRef::parse)
                    .is_some_and(|k| k.row() == row)
            },
            |old| key_of(old).is_some_and(|k| target.compare(k) == Ordering::Greater),
        );
    }

    /// The node of `row`'s smallest key, if the row index knows the row.
    fn row_start(&self, row: &[u8]) -> Option<NonNull<Node>> {
        if !self.rows_usable.load(AtomicOrdering::Relaxed) {
            return None;
        }
        let found = self.rows.find(self.rows.hash(row), |n| {
            NonNull::new(n)
                .and_then(|n| KeyRef::parse(self.node_key(n)))
                .is_some_and(|k| k.row() == row)
        });
        NonNull::new(found)
    }

    /// False only if no cell of `row` was inserted before this call: every inserted row is in
    /// the index before its insert returns, unless the index was given up on.
    pub(crate) fn may_contain_row(&self, row: &[u8]) -> bool {
        !self.rows_usable.load(AtomicOrdering::Relaxed) || self.row_start(row).is_some()
    }

    /// For a seek to a row's start (a Get's), the first node ≥ `target` if the row index
    /// knows the row; `None` means search.
    fn indexed_row_start(&self, target: &Target<'_>) -> Option<NonNull<Node>> {
        let k = target.parsed.filter(KeyRef::is_row_start)?;
        self.row_start(k.row())
    }

    /// The first node whose key is ≥ `target`: from the row index for a row's start it
    /// knows, otherwise by a search from the top.
    #[cfg(test)]
    fn seek_node(&self, target: &Target<'_>) -> Option<NonNull<Node>> {
        self.indexed_row_start(target)
            .or_else(|| self.find_greater_or_equal(target, None))
    }

    /// Allocates a node for (`key`, `value`), links it after `prev[l]` at each level of its
    /// tower, and leaves `prev[l]` at the new node there. `prev` must be the search path of
    /// `key` (every `prev[l]` below it, every successor above it).
    fn link(
        &self,
        writer: &mut Writer,
        key: &[u8],
        value: &[u8],
        prev: &mut [*const Node; MAX_HEIGHT],
    ) -> NonNull<Node> {
        let (Ok(key_len), Ok(value_len)) = (u32::try_from(key.len()), u32::try_from(value.len()))
        else {
            panic!("memstore: a key or value of 4 GiB or more cannot be stored");
        };
        let height = writer.random_height();
        if height > self.height.load(AtomicOrdering::Relaxed) {
            // `prev` is already null (the head) at the new levels: nothing was searched there.
            self.height.store(height, AtomicOrdering::Relaxed);
        }

        let size = HEADER_LEN + height * size_of::<AtomicPtr<Node>>() + key.len() + value.len();
        let node = writer.arena.alloc(size, align_of::<Node>()).cast::<Node>();
        // The node will sit right before its level-0 successor: of the same column, that
        // one's last node is this one's too.
        let successor = NonNull::new(self.next(prev[0], 0));
        let column_last = match successor {
            Some(s) if same_column(self.node_key(s), key) => self.column_last(s).as_ptr(),
            _ => node.as_ptr(),
        };
        // SAFETY: `node` is a fresh, 8-aligned arena allocation of `size` bytes that no other
        // thread can reach yet (it is unpublished), so plain writes cannot race. The header,
        // the `height` tower slots and the key and value bytes all lie inside it: the tower
        // starts at `HEADER_LEN`, the key right after the tower, the value after the key.
        unsafe {
            ptr::write(
                node.as_ptr(),
                Node {
                    key_len,
                    value_len,
                    height: height as u32,
                    _pad: 0,
                    column_last,
                    next: [],
                },
            );
            let tower = Self::tower_of(node.as_ptr());
            for (level, &p) in prev.iter().enumerate().take(height) {
                let successor = self.next(p, level);
                ptr::write(tower.add(level).cast_mut(), AtomicPtr::new(successor));
            }
            let key_dst = tower.add(height).cast::<u8>().cast_mut();
            ptr::copy_nonoverlapping(key.as_ptr(), key_dst, key.len());
            ptr::copy_nonoverlapping(value.as_ptr(), key_dst.add(key.len()), value.len());
        }
        for (level, p) in prev.iter_mut().enumerate().take(height) {
            self.slot(*p, level)
                .store(node.as_ptr(), AtomicOrdering::Release);
            *p = node.as_ptr().cast_const();
        }

        self.len.fetch_add(1, AtomicOrdering::Relaxed);
        let index_bytes = writer.rows.bytes();
        self.used_bytes.store(
            writer.arena.used_bytes() + index_bytes,
            AtomicOrdering::Relaxed,
        );
        self.reserved_bytes.store(
            writer.arena.reserved_bytes() + index_bytes,
            AtomicOrdering::Relaxed,
        );
        node
    }

    /// The first node whose key is ≥ `target`; fills `prev[l]` with the last node (null for
    /// the head) before it at each level in use.
    #[allow(
        clippy::indexing_slicing,
        reason = "levels are below the list's height, at most MAX_HEIGHT (`random_height` caps it), the length of `prev`"
    )]
    fn find_greater_or_equal(
        &self,
        target: &Target<'_>,
        mut prev: Option<&mut [*const Node; MAX_HEIGHT]>,
    ) -> Option<NonNull<Node>> {
        let mut x: *const Node = ptr::null();
        let mut level = self.height.load(AtomicOrdering::Relaxed) - 1;
        // The node known to be ≥ target from the level above: not compared twice.
        let mut known_ge: *const Node = ptr::null();
        loop {
            let next = NonNull::new(self.next(x, level));
            let advance = next.is_some_and(|n| {
                n.as_ptr().cast_const() != known_ge
                    && target.compare(self.node_key(n)) == Ordering::Less
            });
            match next {
                Some(n) if advance => x = n.as_ptr(),
                _ => {
                    if let Some(prev) = prev.as_deref_mut() {
                        prev[level] = x;
                    }
                    if level == 0 {
                        return next;
                    }
                    known_ge = next.map_or(ptr::null(), |n| n.as_ptr().cast_const());
                    level -= 1;
                }
            }
        }
    }

    /// The first node ≥ `target` after `from`, a node below it: a finger search that climbs
    /// the towers of the nodes it passes, so it costs compares in the log of the distance
    /// walked rather than of the list's length.
    fn find_forward(&self, from: NonNull<Node>, target: &Target<'_>) -> Option<NonNull<Node>> {
        let mut x = from.as_ptr().cast_const();
        'climb: loop {
            // SAFETY: `x` is a published node of this list (see `node_key`).
            let mut level = unsafe { (*x).height } as usize - 1;
            loop {
                match NonNull::new(self.next(x, level)) {
                    Some(n) if target.compare(self.node_key(n)) == Ordering::Less => {
                        x = n.as_ptr();
                        continue 'climb;
                    }
                    // The successor compared, not one read again: a node linked since may
                    // be below `target`, and the answer must be one that was checked.
                    found if level == 0 => return found,
                    _ => level -= 1,
                }
            }
        }
    }

    /// The last node whose key is ≤ `target`, if any.
    fn find_last_less_or_equal(&self, target: &Target<'_>) -> Option<NonNull<Node>> {
        let mut x: *const Node = ptr::null();
        let mut level = self.height.load(AtomicOrdering::Relaxed) - 1;
        let mut known_gt: *const Node = ptr::null();
        loop {
            let next = NonNull::new(self.next(x, level));
            let advance = next.is_some_and(|n| {
                n.as_ptr().cast_const() != known_gt
                    && target.compare(self.node_key(n)) != Ordering::Greater
            });
            match next {
                Some(n) if advance => x = n.as_ptr(),
                _ => {
                    if level == 0 {
                        return NonNull::new(x.cast_mut());
                    }
                    known_gt = next.map_or(ptr::null(), |n| n.as_ptr().cast_const());
                    level -= 1;
                }
            }
        }
    }

    /// The `next` slot at `level` of `node`, or of the head when `node` is null.
    ///
    /// `node` must be null or a node of this list with a tower taller than `level`.
    #[inline]
    #[allow(
        clippy::indexing_slicing,
        reason = "callers pass levels below the height, at most MAX_HEIGHT, the length of `head`"
    )]
    fn slot(&self, node: *const Node, level: usize) -> &AtomicPtr<Node> {
        if node.is_null() {
            return &self.head[level];
        }
        // SAFETY: `node` is a published (or, for the writer, fully initialised) node of this
        // list, alive as long as `self`; callers only reach it at levels below its height,
        // so slot `level` is inside its tower and was initialised before publication.
        unsafe { &*Self::tower_of(node).add(level) }
    }

    /// The successor of `node` (null: the head) at `level`; null at the end.
    #[inline]
    fn next(&self, node: *const Node, level: usize) -> *mut Node {
        self.slot(node, level).load(AtomicOrdering::Acquire)
    }

    /// The first slot of `node`'s tower. Pure address arithmetic: reads nothing.
    #[inline]
    fn tower_of(node: *const Node) -> *const AtomicPtr<Node> {
        node.wrapping_byte_add(HEADER_LEN).cast::<AtomicPtr<Node>>()
    }

    /// The key bytes of a node of this list, borrowed for as long as the list lives.
    #[inline]
    fn node_key(&self, node: NonNull<Node>) -> &[u8] {
        let node = node.as_ptr().cast_const();
        // SAFETY: `node` is a published node of this list (invariants: fully initialised
        // before publication, never written again except its atomic `next` slots, freed only
        // when the list drops). Its key is `key_len` bytes right after its tower.
        unsafe {
            let height = (*node).height as usize;
            let key = Self::tower_of(node).add(height).cast::<u8>();
            std::slice::from_raw_parts(key, (*node).key_len as usize)
        }
    }

    /// The last node of `node`'s column when `node` was linked (see the module's doc).
    #[inline]
    fn column_last(&self, node: NonNull<Node>) -> NonNull<Node> {
        // SAFETY: `node` is a published node of this list (see `node_key`); `column_last` was
        // written before publication and points to a node of this list, or is `node` itself.
        NonNull::new(unsafe { (*node.as_ptr()).column_last }.cast_mut()).unwrap_or(node)
    }

    /// The value bytes of a node of this list.
    #[inline]
    fn node_value(&self, node: NonNull<Node>) -> &[u8] {
        let node = node.as_ptr().cast_const();
        // SAFETY: as in `node_key`; the value's `value_len` bytes follow the key in the same
        // allocation. The pointer is derived from `node` (whose provenance covers the whole
        // allocation), not from the key slice, whose provenance ends at the key.
        unsafe {
            let key_len = (*node).key_len as usize;
            let value = Self::tower_of(node)
                .add((*node).height as usize)
                .cast::<u8>()
                .add(key_len);
            std::slice::from_raw_parts(value, (*node).value_len as usize)
        }
    }
}

/// A cursor over a [`SkipList`] that keeps it alive; it reads only nodes of its own list.
pub(crate) struct SkipIter {
    list: Arc<SkipList>,
    /// Current node; `None` when not positioned.
    node: Option<NonNull<Node>>,
    /// The path of the last search from the top: `path[l]` is a node at level `l` (null: the
    /// head), each at or before `path[0]` in key order. A seek ahead of the current node goes
    /// forward from that node ([`SkipList::find_forward`]); a seek to a target at or behind
    /// it (a merge re-seeking every source) but above `path[0]` starts from the path instead
    /// of the top.
    path: Option<[*const Node; MAX_HEIGHT]>,
}

// SAFETY: `node` and `path` point into memory owned by `list`, which the iterator keeps alive, and
// published nodes are immutable except for atomics; so the iterator may move to another
// thread exactly like the `Arc<SkipList>` it holds (`SkipList` is `Send + Sync`).
unsafe impl Send for SkipIter {}

impl SkipIter {
    pub(crate) fn new(list: Arc<SkipList>) -> SkipIter {
        SkipIter {
            list,
            node: None,
            path: None,
        }
    }

    pub(crate) fn valid(&self) -> bool {
        self.node.is_some()
    }

    /// The current key; empty when not positioned.
    pub(crate) fn key(&self) -> &[u8] {
        match self.node {
            Some(node) => self.list.node_key(node),
            None => &[],
        }
    }

    /// The current value; empty when not positioned.
    pub(crate) fn value(&self) -> &[u8] {
        match self.node {
            Some(node) => self.list.node_value(node),
            None => &[],
        }
    }

    pub(crate) fn next(&mut self) {
        if let Some(node) = self.node {
            self.node = NonNull::new(self.list.next(node.as_ptr(), 0));
        }
    }

    pub(crate) fn seek(&mut self, target: &[u8]) {
        let target = Target::new(target);
        if let Some(node) = self.list.indexed_row_start(&target) {
            self.node = Some(node);
            return;
        }
        let list = &self.list;
        if let Some(node) = self.node {
            if target.compare(list.node_key(node)) == Ordering::Less {
                // Forward from where the cursor stands, from its column's last node if that is
                // still below the target (skipping a column's older versions); moving to a
                // nearby row costs compares in the log of the distance.
                let last = list.column_last(node);
                let from = if last != node && target.compare(list.node_key(last)) == Ordering::Less
                {
                    last
                } else {
                    node
                };
                self.node = list.find_forward(from, &target);
                return;
            }
        }
        let below = |p: &[*const Node; MAX_HEIGHT]| {
            NonNull::new(p[0].cast_mut())
                .is_none_or(|n| target.compare(list.node_key(n)) == Ordering::Less)
        };
        match &mut self.path {
            Some(path) if below(path) => {
                self.node = list.advance_to(&target, path);
            }
            _ => {
                let mut path = [ptr::null::<Node>(); MAX_HEIGHT];
                self.node = list.find_greater_or_equal(&target, Some(&mut path));
                self.path = Some(path);
            }
        }
    }

    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        self.node = self.list.find_last_less_or_equal(&Target::new(target));
    }

    pub(crate) fn seek_to_first(&mut self) {
        self.node = NonNull::new(self.list.next(ptr::null(), 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::cell::CellType;
    use cellar_model::key::{compare_keys, first_on_row, make_key};

    fn key(row: u32, seq: u64) -> Vec<u8> {
        make_key(format!("r{row:05}").as_bytes(), b"q", 1, CellType::Put, seq)
    }

    #[test]
    fn heights_follow_quarter_probability() {
        let mut w = Writer {
            arena: Arena::new(4096),
            rng: 0x9e37_79b9_7f4a_7c15,
            rows: RowIndex::new().1,
            splice: Splice {
                prev: [ptr::null(); MAX_HEIGHT],
                last: ptr::null(),
            },
        };
        let n = if cfg!(miri) { 4_000 } else { 100_000 };
        let tall = (0..n).filter(|_| w.random_height() > 1).count();
        // Expect n/4, within a few standard deviations (the seed is fixed).
        assert!(
            (n * 22 / 100..n * 28 / 100).contains(&tall),
            "{tall} of {n}"
        );
        assert!((0..n).all(|_| (1..=MAX_HEIGHT).contains(&w.random_height())));
    }

    #[test]
    fn insert_and_walk_in_order() {
        let list = Arc::new(SkipList::new(4096));
        let mut expected = Vec::new();
        for i in 0..500u32 {
            let row = (i * 7919) % 500;
            let k = key(row, u64::from(i));
            list.insert(&k, &i.to_be_bytes());
            expected.push((k, i.to_be_bytes().to_vec()));
        }
        expected.sort_by(|a, b| compare_keys(&a.0, &b.0));
        let mut it = SkipIter::new(list.clone());
        assert!(!it.valid());
        assert!(it.key().is_empty());
        it.seek_to_first();
        for (k, v) in &expected {
            assert!(it.valid());
            assert_eq!(it.key(), &k[..]);
            assert_eq!(it.value(), &v[..]);
            it.next();
        }
        assert!(!it.valid());
        assert_eq!(list.len(), 500);
        assert!(list.used_bytes() > 0 && list.used_bytes() <= list.reserved_bytes());
    }

    /// Every level's keys, walked from the head.
    fn levels(list: &SkipList) -> Vec<Vec<Vec<u8>>> {
        (0..MAX_HEIGHT)
            .map(|level| {
                let mut keys = Vec::new();
                let mut x = list.next(ptr::null(), level);
                while let Some(n) = NonNull::new(x) {
                    keys.push(list.node_key(n).to_vec());
                    x = list.next(n.as_ptr(), level);
                }
                keys
            })
            .collect()
    }

    #[test]
    fn sorted_runs_link_every_level_in_order() {
        let list = SkipList::new(4096);
        let mut all = Vec::new();
        // Runs of ten nearby keys (like a row's cells) interleaved with earlier runs' keys,
        // some in order and some reversed (each of those searched for from the top).
        let runs: u32 = if cfg!(miri) { 40 } else { 300 };
        for run in 0..runs {
            let base = (run * 7919) % 3000;
            let mut keys: Vec<Vec<u8>> =
                (0..10).map(|i| key(base + 7 * i, u64::from(run))).collect();
            if run % 3 == 0 {
                keys.reverse();
            }
            list.insert_all(keys.iter().map(|k| (&k[..], &b"v"[..])));
            all.extend(keys);
        }
        let levels = assert_levels_in_order(&list, &mut all);
        assert!(!levels[2].is_empty(), "hundreds of keys reach level 2");
    }

    /// Level 0 holds every key of `all` in order; every level above is sorted and a subset of
    /// the one below. Returns the levels.
    fn assert_levels_in_order(list: &SkipList, all: &mut [Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
        all.sort_by(|a, b| compare_keys(a, b));
        let levels = levels(list);
        assert_eq!(levels[0], all, "level 0 holds every key in order");
        for (level, keys) in levels.iter().enumerate().skip(1) {
            assert!(
                keys.windows(2)
                    .all(|w| compare_keys(&w[0], &w[1]) == Ordering::Less),
                "level {level} is sorted"
            );
            let below: std::collections::HashSet<&Vec<u8>> = levels[level - 1].iter().collect();
            assert!(
                keys.iter().all(|k| below.contains(k)),
                "level {level} ⊆ level {}",
                level - 1
            );
        }
        levels
    }

    /// One key per insert, as a writer of single puts does: runs of keys in order (each
    /// searched for from the last insert's path), runs in reverse and keys that jump back
    /// (searched for from the top) interleaved; every level stays sorted and complete.
    #[test]
    fn single_inserts_in_and_out_of_order_link_every_level_in_order() {
        let list = SkipList::new(4096);
        let mut all = Vec::new();
        let runs: u32 = if cfg!(miri) { 30 } else { 300 };
        for run in 0..runs {
            let base = (run * 7919) % 3000;
            let mut rows: Vec<u32> = (0..10).map(|i| base + 3 * i).collect();
            if run % 4 == 1 {
                rows.reverse();
            }
            for row in rows {
                let k = key(row, u64::from(run));
                list.insert(&k, b"v");
                all.push(k);
            }
        }
        assert_levels_in_order(&list, &mut all);
        for k in &all {
            let row = KeyRef::parse(k)
                .map(|p| p.row().to_vec())
                .unwrap_or_default();
            assert!(list.may_contain_row(&row), "row index lacks a row");
        }
    }

    #[test]
    fn empty_list_seeks_are_invalid() {
        let list = Arc::new(SkipList::new(4096));
        let mut it = SkipIter::new(list);
        it.seek_to_first();
        assert!(!it.valid());
        it.seek(&key(1, 1));
        assert!(!it.valid());
        it.seek_for_prev(&key(1, 1));
        assert!(!it.valid());
        it.next();
        assert!(!it.valid());
    }

    #[test]
    fn malformed_keys_order_by_bytes() {
        // Keys `compare_keys` cannot parse still sort consistently (by raw bytes).
        let list = Arc::new(SkipList::new(4096));
        for k in [&b"b"[..], b"", b"a", b"ab"] {
            list.insert(k, b"v");
        }
        let mut it = SkipIter::new(list.clone());
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push(it.key().to_vec());
            it.next();
        }
        assert_eq!(
            seen,
            vec![b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"b".to_vec()]
        );
        // A well-formed key among them: its row's start is found by search (the row index is
        // off once a malformed key went in) and agrees with byte order.
        let good = key(1, 1);
        list.insert(&good, b"v");
        let mut it = SkipIter::new(list);
        it.seek(&first_on_row(b"r00001"));
        assert!(it.valid());
        assert_eq!(
            it.key(),
            compare_first_ge(&seen, &good, &first_on_row(b"r00001"))
        );
    }

    /// Of `keys` and `extra`, the smallest key ≥ `target` by `compare_keys`.
    fn compare_first_ge(keys: &[Vec<u8>], extra: &[u8], target: &[u8]) -> Vec<u8> {
        let mut all: Vec<Vec<u8>> = keys.to_vec();
        all.push(extra.to_vec());
        all.sort_by(|a, b| compare_keys(a, b));
        all.into_iter()
            .find(|k| compare_keys(k, target) != Ordering::Less)
            .unwrap_or_default()
    }

    #[test]
    fn row_starts_come_from_the_index_and_match_a_search() {
        let list = Arc::new(SkipList::new(4096));
        // Rows get later cells that sort before earlier ones (a smaller qualifier, a newer
        // timestamp): the index must follow each row's smallest key.
        let rows: u32 = if cfg!(miri) { 200 } else { 2000 };
        for round in 0..3u64 {
            for row in 0..rows {
                let r = format!("r{row:05}");
                let q = [b'q', b'0' + (2 - round) as u8];
                list.insert(
                    &make_key(r.as_bytes(), &q, 10 + round, CellType::Put, round),
                    b"v",
                );
            }
        }
        assert!(list.rows_usable.load(AtomicOrdering::Relaxed));
        for row in 0..=rows {
            let r = format!("r{row:05}");
            let target = first_on_row(r.as_bytes());
            let t = Target::new(&target);
            let by_search = list.find_greater_or_equal(&t, None);
            assert_eq!(list.seek_node(&t), by_search, "row {r}");
            if row < rows {
                let hit = list.row_start(r.as_bytes()).expect("indexed");
                assert_eq!(
                    KeyRef::parse(list.node_key(hit)).map(|k| k.qualifier()),
                    Some(&b"q0"[..])
                );
            } else {
                assert!(list.row_start(r.as_bytes()).is_none(), "absent row");
            }
        }
    }

    #[test]
    fn forward_seeks_from_any_node_land_where_a_search_from_the_top_does() {
        let list = Arc::new(SkipList::new(4096));
        // A hot column: many versions of few columns, as after a run of updates.
        let (rows, versions): (u32, u64) = if cfg!(miri) { (5, 8) } else { (40, 60) };
        for v in 0..versions {
            for row in 0..rows {
                for q in [&b"a"[..], b"b", b"c"] {
                    let r = format!("r{row:03}");
                    list.insert(
                        &make_key(r.as_bytes(), q, v + 10, CellType::Put, v + 1),
                        b"v",
                    );
                }
            }
        }
        // Versions older than every other (linked after the column's last node, which goes
        // stale) and one in the middle of a column.
        for row in (0..rows).step_by(3) {
            let r = format!("r{row:03}");
            for (ts, seq) in [(5, 1000), (3, 1001), (12, 1002)] {
                list.insert(&make_key(r.as_bytes(), b"b", ts, CellType::Put, seq), b"v");
            }
        }
        let keys: Vec<Vec<u8>> = {
            let mut it = SkipIter::new(list.clone());
            it.seek_to_first();
            std::iter::from_fn(|| {
                let k = it.valid().then(|| it.key().to_vec());
                it.next();
                k
            })
            .collect()
        };
        let targets: Vec<Vec<u8>> = (0..=rows)
            .flat_map(|row| {
                let r = format!("r{row:03}");
                [
                    first_on_row(r.as_bytes()),
                    cellar_model::key::first_on_column(r.as_bytes(), b"b"),
                    cellar_model::key::first_on_column(r.as_bytes(), b"b\0"),
                ]
            })
            .collect();
        // Every node's column_last is of its column and not before it.
        for from in &keys {
            let node = list
                .find_greater_or_equal(&Target::new(from), None)
                .expect("a listed key");
            let last = list.node_key(list.column_last(node));
            assert!(same_column(from, last) && compare_keys(from, last).is_le());
        }
        for (i, from) in keys.iter().enumerate().step_by(7) {
            let from_node = list
                .find_greater_or_equal(&Target::new(from), None)
                .expect("a listed key");
            // The cursor standing there, seeking ahead (through its column's last node).
            for target in targets.iter().filter(|t| compare_keys(from, t).is_lt()) {
                let mut it = SkipIter::new(list.clone());
                it.seek(from);
                it.seek(target);
                let expect = list
                    .find_greater_or_equal(&Target::new(target), None)
                    .map(|n| list.node_key(n).to_vec());
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    expect,
                    "from key {i}"
                );
            }
            for target in targets.iter().filter(|t| compare_keys(from, t).is_lt()) {
                let t = Target::new(target);
                assert_eq!(
                    list.find_forward(from_node, &t),
                    list.find_greater_or_equal(&t, None),
                    "from key {i}"
                );
            }
        }
        // Through the cursor: a seek ahead moves forward, a seek behind searches again.
        let mut it = SkipIter::new(list.clone());
        for target in targets.iter().chain(targets.iter().rev()) {
            it.seek(target);
            let expect = list
                .find_greater_or_equal(&Target::new(target), None)
                .map(|n| list.node_key(n).to_vec());
            assert_eq!(it.valid().then(|| it.key().to_vec()), expect);
        }
    }
}
