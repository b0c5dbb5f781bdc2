//! Leveled compaction: which files a store merges next (RocksDB's leveled compaction with
//! dynamic level sizes).
//!
//! A store's files sit in levels. Level 0 holds flushes (and references, and files written
//! before levels existed): they may overlap each other. Every level `1..=MAX_LEVEL` is one
//! sorted run: its files hold disjoint row ranges. The bottom level holds most of the data;
//! each level above it is given a tenth (`fanout`) of the size of the one below, and the
//! highest level whose share is still at least `base_bytes` is the *base* level, into which
//! level 0 is merged (levels above the base stay empty: a small store is level 0 and the
//! bottom level). Against size-tiered compaction of whole runs (`compaction.rs`'s ratio rule),
//! the space a store of overwrites takes stays within ~1.1× its live data instead of 1.5×,
//! a read meets a handful of runs, and each merge rewrites one file's range instead of a
//! whole run.
//!
//! What to merge, by score (a level's size over its target, level 0's file count over
//! `l0_trigger` or its bytes over `l0_trigger_bytes`), highest first:
//! - level 0: all its files with the base level's files that overlap them;
//! - level `k`: one file (taken in turn through the key space, as RocksDB's compaction
//!   cursor) with the files of level `k + 1` that overlap it.
//!
//! A file with nothing to merge with below it moves down without being rewritten (RocksDB's
//! trivial move: sequential writes are written once). Two compactions of a store run at once
//! when they share no file and do not write overlapping row ranges into one level ([`Busy`]).
//! While level 0 cannot go down (its files are being merged into the base level, or the base
//! level is busy), the flushes that arrive meanwhile are merged into one level 0 file once
//! there are a trigger's worth, so they do not pile up behind a long merge below.
//!
//! Levels guide only which files are merged: a read gives the same answer for any grouping
//! of files (cells are ordered by their full key), so a level is a hint written into each file
//! (`FileMeta::level`) and checked on open, where files that break a level's disjointness go
//! back to level 0 (a move without a rewrite is not written down: after a restart the file is
//! at its written level and moves again).

use super::store_files::StoreFileHandle;
use std::collections::HashSet;
use std::sync::Arc;

/// The bottom level.
pub const MAX_LEVEL: u8 = 6;
const LEVELS: usize = MAX_LEVEL as usize + 1;

/// How levels are sized (`StorageConfig`'s `level_*` settings).
#[derive(Debug, Clone, Copy)]
pub struct LevelOptions {
    /// Level 0 files that start a merge into the base level.
    pub l0_trigger: usize,
    /// Level 0 bytes that start one too (a merge of level 0 into itself makes fewer, larger
    /// files that must still go down).
    pub l0_trigger_bytes: u64,
    /// The smallest target a level below 0 is given (RocksDB's
    /// `max_bytes_for_level_base`).
    pub base_bytes: u64,
    /// Each level's target is this many times the one above it.
    pub fanout: u64,
}

/// What compactions are doing in one store: the files they merge and the row ranges they
/// write into each level.
#[derive(Default)]
pub struct Busy {
    pub files: HashSet<u64>,
    /// `(claim, level, first row, last row)`.
    pub writing: Vec<(u64, u8, Vec<u8>, Vec<u8>)>,
}

impl Busy {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.writing.is_empty()
    }

    fn writes_into(&self, level: u8, lo: &[u8], hi: &[u8]) -> bool {
        self.writing
            .iter()
            .any(|(_, l, a, b)| *l == level && a.as_slice() <= hi && lo <= b.as_slice())
    }
}

/// A merge (or a move) chosen by [`pick`].
pub struct Plan {
    pub inputs: Vec<Arc<StoreFileHandle>>,
    pub from: u8,
    pub to: u8,
    /// Every input moves to `to` as it is: nothing below overlaps them.
    pub trivial: bool,
    /// Rows the outputs may span (inclusive), for [`Busy::writing`]; `None` for level 0.
    pub range: Option<(Vec<u8>, Vec<u8>)>,
}

fn rows(f: &StoreFileHandle) -> Option<(&[u8], &[u8])> {
    f.file.rows()
}

fn overlaps(f: &StoreFileHandle, lo: &[u8], hi: &[u8]) -> bool {
    rows(f).is_some_and(|(a, b)| a <= hi && lo <= b)
}

/// Sizes of the levels, the base level and each level's target.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub sizes: [u64; LEVELS],
    pub files: [usize; LEVELS],
    pub targets: [u64; LEVELS],
    pub base: u8,
}

#[allow(
    clippy::indexing_slicing,
    reason = "levels index `[_; LEVELS]` arrays: constants below LEVELS and loop variables in 1..LEVELS"
)]
pub fn shape(files: &[Arc<StoreFileHandle>], opts: &LevelOptions) -> Shape {
    let mut sizes = [0u64; LEVELS];
    let mut counts = [0usize; LEVELS];
    for f in files {
        let l = usize::from(f.level().min(MAX_LEVEL));
        if let (Some(s), Some(c)) = (sizes.get_mut(l), counts.get_mut(l)) {
            *s += f.size();
            *c += 1;
        }
    }
    let fanout = opts.fanout.max(2);
    let mut targets = [0u64; LEVELS];
    let mut t = sizes[LEVELS - 1].max(opts.base_bytes);
    let mut base = MAX_LEVEL;
    for l in (1..LEVELS).rev() {
        targets[l] = t;
        if t >= opts.base_bytes {
            base = l as u8;
        }
        t /= fanout;
    }
    Shape {
        sizes,
        files: counts,
        targets,
        base,
    }
}

impl Shape {
    /// Levels that need a merge, most urgent first: `(score, level)`, score ≥ 1.
    #[allow(
        clippy::indexing_slicing,
        reason = "levels index `[_; LEVELS]` arrays: 0 and loop variables in 1..LEVELS - 1"
    )]
    fn due(&self, opts: &LevelOptions) -> Vec<(f64, u8)> {
        let mut due = Vec::new();
        let l0 = (self.files[0] as f64 / opts.l0_trigger.max(1) as f64)
            .max(self.sizes[0] as f64 / opts.l0_trigger_bytes.max(1) as f64);
        if l0 >= 1.0 {
            due.push((l0, 0));
        }
        for l in 1..LEVELS - 1 {
            let score = if (l as u8) < self.base {
                // Above the base (the store shrank, or an old layout): empty it downwards.
                if self.sizes[l] > 0 {
                    f64::MAX
                } else {
                    0.0
                }
            } else {
                self.sizes[l] as f64 / self.targets[l].max(1) as f64
            };
            if score > 1.0 {
                due.push((score, l as u8));
            }
        }
        due.sort_by(|a, b| b.0.total_cmp(&a.0));
        due
    }
}

/// Whether any level needs a merge.
pub fn wants_compaction(files: &[Arc<StoreFileHandle>], opts: &LevelOptions) -> bool {
    !shape(files, opts).due(opts).is_empty()
}

/// The next merge for a store whose files are `files`, avoiding what `busy` holds;
/// `cursors[k]`: the last row of the level `k` file merged last.
pub fn pick(
    files: &[Arc<StoreFileHandle>],
    busy: &Busy,
    opts: &LevelOptions,
    cursors: &[Vec<u8>],
) -> Option<Plan> {
    let shape = shape(files, opts);
    let at = |l: u8| -> Vec<&Arc<StoreFileHandle>> {
        let mut v: Vec<_> = files.iter().filter(|f| f.level() == l).collect();
        v.sort_by(|a, b| rows(a).cmp(&rows(b)));
        v
    };
    let free = |f: &&Arc<StoreFileHandle>| !busy.files.contains(&f.number);
    for (_, level) in shape.due(opts) {
        if level == 0 {
            let l0 = at(0);
            let to = shape.base;
            let all_free = l0.iter().all(free);
            if all_free {
                if let Some(plan) = merge_into(&l0, &at(to), 0, to, busy) {
                    return Some(plan);
                }
            }
            // Busy level 0 files that are not going down are another merge among
            // themselves: it ends soon, and level 0 then goes down whole. Starting more of
            // those beside it could keep level 0 from ever being free to go down.
            let going_down = busy.writing.iter().any(|(_, l, _, _)| *l == to);
            if !all_free && !going_down {
                continue;
            }
            // Level 0 cannot go down now: its older files are on their way down already, or
            // the base level is busy. Merge the flushes that arrived meanwhile into one level 0
            // file (RocksDB's intra-L0 compaction), on a thread that would otherwise wait for
            // the long merge below, so they do not pile up into runs that hold writers back.
            // Files already a merge's worth stay as they are until level 0 goes down.
            let small: Vec<&Arc<StoreFileHandle>> = l0
                .iter()
                .filter(|f| free(f) && f.size() < opts.l0_trigger_bytes)
                .copied()
                .collect();
            if small.len() >= opts.l0_trigger.max(2) {
                return Some(Plan {
                    inputs: small.into_iter().cloned().collect(),
                    from: 0,
                    to: 0,
                    trivial: false,
                    range: None,
                });
            }
            continue;
        }
        let files_at = at(level);
        let below = at(level + 1);
        let cursor = cursors
            .get(usize::from(level))
            .map_or(&[][..], Vec::as_slice);
        let start = files_at
            .iter()
            .position(|f| rows(f).is_some_and(|(first, _)| first > cursor))
            .unwrap_or(0);
        for i in 0..files_at.len() {
            let Some(f) = files_at.get((start + i) % files_at.len()) else {
                continue;
            };
            if !free(f) {
                continue;
            }
            if let Some(plan) = merge_into(std::slice::from_ref(f), &below, level, level + 1, busy)
            {
                return Some(plan);
            }
        }
    }
    None
}

/// `upper` (all free) merged with the files of `lower` (level `to`) that overlap them, if
/// none of those is busy and no other compaction writes that range of `to`.
fn merge_into(
    upper: &[&Arc<StoreFileHandle>],
    lower: &[&Arc<StoreFileHandle>],
    from: u8,
    to: u8,
    busy: &Busy,
) -> Option<Plan> {
    let mut lo: Option<&[u8]> = None;
    let mut hi: Option<&[u8]> = None;
    for (a, b) in upper.iter().filter_map(|f| rows(f)) {
        lo = Some(lo.map_or(a, |l| l.min(a)));
        hi = Some(hi.map_or(b, |h| h.max(b)));
    }
    let (Some(mut lo), Some(mut hi)) = (lo, hi) else {
        // Nothing but empty files: merged among themselves, written nowhere below.
        return (upper.len() >= 2).then(|| Plan {
            inputs: upper.iter().map(|f| Arc::clone(f)).collect(),
            from,
            to: from,
            trivial: false,
            range: None,
        });
    };
    let overlapping: Vec<&Arc<StoreFileHandle>> = lower
        .iter()
        .filter(|f| overlaps(f, lo, hi))
        .copied()
        .collect();
    if overlapping.iter().any(|f| busy.files.contains(&f.number)) {
        return None;
    }
    for (a, b) in overlapping.iter().filter_map(|f| rows(f)) {
        lo = lo.min(a);
        hi = hi.max(b);
    }
    if busy.writes_into(to, lo, hi) {
        return None;
    }
    // Moved as they are when nothing below overlaps and they do not overlap each other.
    let mut sorted: Vec<(&[u8], &[u8])> = upper.iter().filter_map(|f| rows(f)).collect();
    sorted.sort();
    let disjoint = sorted.len() == upper.len()
        && sorted
            .iter()
            .zip(sorted.iter().skip(1))
            .all(|(a, b)| a.1 < b.0);
    let trivial = overlapping.is_empty() && disjoint;
    Some(Plan {
        inputs: upper
            .iter()
            .chain(overlapping.iter())
            .map(|f| Arc::clone(f))
            .collect(),
        from,
        to,
        trivial,
        range: Some((lo.to_vec(), hi.to_vec())),
    })
}

/// On open: a level's files must hold disjoint row ranges. Any that does not (or has no rows,
/// or is a reference) goes back to level 0. Files are kept in the order of `files`' numbers.
pub fn check_levels(files: &[Arc<StoreFileHandle>]) {
    let mut by_level: Vec<&Arc<StoreFileHandle>> = files.iter().filter(|f| f.level() > 0).collect();
    for f in &by_level {
        if f.level() > MAX_LEVEL || f.reference.is_some() || rows(f).is_none() {
            f.set_level(0);
        }
    }
    by_level.retain(|f| f.level() > 0);
    // In row order within a level: of two overlapping files, the later one goes to level 0.
    by_level.sort_by(|a, b| {
        a.level()
            .cmp(&b.level())
            .then(rows(a).cmp(&rows(b)))
            .then(a.number.cmp(&b.number))
    });
    let mut last: Option<(u8, &[u8])> = None;
    for f in by_level {
        let Some((first, end)) = rows(f) else {
            continue;
        };
        match last {
            Some((l, prev_end)) if l == f.level() && first <= prev_end => {
                tracing::info!(file = %f.own_path.display(), level = l, "a store file overlaps another of its level; it goes to level 0");
                f.set_level(0);
            }
            _ => last = Some((f.level(), end)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::test_files::Files;

    fn numbers(plan: &Plan) -> Vec<u64> {
        let mut n: Vec<u64> = plan.inputs.iter().map(|f| f.number).collect();
        n.sort_unstable();
        n
    }

    /// A small store: base level 6, level 0 due at three files.
    fn opts(l0_trigger_bytes: u64) -> LevelOptions {
        LevelOptions {
            l0_trigger: 3,
            l0_trigger_bytes,
            base_bytes: 1 << 30,
            fanout: 10,
        }
    }

    #[test]
    fn level_zero_goes_down_when_nothing_is_busy() {
        let mut fs = Files::new();
        let bottom = fs.file(&[0, 50, 99]);
        bottom.set_level(MAX_LEVEL);
        let files = vec![
            bottom,
            fs.file(&[1, 60]),
            fs.file(&[2, 70]),
            fs.file(&[3, 80]),
        ];
        let plan = pick(&files, &Busy::default(), &opts(u64::MAX), &[]).expect("a merge");
        assert_eq!((plan.from, plan.to), (0, MAX_LEVEL));
        assert_eq!(numbers(&plan), vec![1, 2, 3, 4]);
    }

    /// Flushes that arrive while level 0's older files are being merged down are merged into
    /// one level 0 file once there are a trigger's worth, instead of waiting (and piling up
    /// into runs that hold writers back); files a merge's size already are left for later.
    #[test]
    fn new_flushes_merge_among_themselves_while_level_zero_goes_down() {
        let mut fs = Files::new();
        let bottom = fs.file(&[0, 50, 99]);
        bottom.set_level(MAX_LEVEL);
        let going_down: Vec<_> = (1..=3).map(|i| fs.file(&[i, 60 + i])).collect();
        let mut busy = Busy::default();
        busy.files.insert(bottom.number);
        busy.files.extend(going_down.iter().map(|f| f.number));
        busy.writing
            .push((1, MAX_LEVEL, b"row000000".to_vec(), b"row000099".to_vec()));
        let mut files = vec![Arc::clone(&bottom)];
        files.extend(going_down.iter().cloned());
        let new1 = fs.file(&[10, 20]);
        let new2 = fs.file(&[11, 21]);
        files.extend([Arc::clone(&new1), Arc::clone(&new2)]);
        // Two new flushes: not yet a trigger's worth.
        assert!(pick(&files, &busy, &opts(u64::MAX), &[]).is_none());
        let new3 = fs.file(&[12, 22]);
        files.push(Arc::clone(&new3));
        let plan = pick(&files, &busy, &opts(u64::MAX), &[]).expect("a merge");
        assert_eq!((plan.from, plan.to, plan.trivial), (0, 0, false));
        assert_eq!(numbers(&plan), vec![new1.number, new2.number, new3.number]);
        // A new file already as large as a level 0 merge's trigger waits to go down.
        let big = new3.size();
        assert!(pick(&files, &busy, &opts(big), &[]).is_none());
        // Level 0's busy files merging among themselves (nothing going down): the new ones
        // wait, so that level 0 is soon free to go down whole.
        let mut among_themselves = Busy::default();
        among_themselves
            .files
            .extend(going_down.iter().map(|f| f.number));
        assert!(pick(&files, &among_themselves, &opts(u64::MAX), &[]).is_none());
    }
}
