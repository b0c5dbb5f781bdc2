//! The store file's bloom filter over XXH64 ([`super::hash`]). Layout (see
//! `docs/storefile-format.md`):
//!
//! ```text
//! hash_fn: u8 | probes: u8 | contents: u8 | num_bits: u64 LE | bits
//! ```
//!
//! `hash_fn` 2 (written since store files record their creation time): the bits are 512-bit
//! (cache-line) blocks; a hash picks one block and sets all its probes there, so a probe costs
//! one cache miss and no division (the whole-array layout, `hash_fn` 1, took one miss and one
//! 64-bit modulo per probe: 10 % of a cached Get). Files with `hash_fn` 1 are still read.
//!
//! A `Row` filter holds row hashes. A `RowCol` filter holds column hashes *and* row hashes
//! (`contents` says which), so it answers `may_contain_row` precisely too; rows are far fewer
//! than columns, so this costs little.

use super::coding::{get_u64_le, DecodeResult, Malformed};
use super::hash::xxh64;
use bytes::Bytes;
use cellar_model::key::KeyRef;
use cellar_model::BloomType;

/// `hash_fn` code of XXH64 with [`ROW_SEED`] and [`COLUMN_SEED`], probes over the whole array.
const HASH_XXH64: u8 = 1;
/// `hash_fn` code of XXH64 with the same seeds, probes inside one 512-bit block.
const HASH_XXH64_BLOCKED: u8 = 2;
/// Bits per block of the blocked layout: one 64-byte cache line.
const BLOCK_BITS: u64 = 512;
/// Seed for row hashes: XXH64(row).
const ROW_SEED: u64 = 0x4365_6c6c_6172_5231; // "CellarR1"
/// Seed for column hashes: XXH64(row_len: u16 BE | row | qualifier). A different seed keeps
/// row `r` and column (`r`, "") apart.
const COLUMN_SEED: u64 = 0x4365_6c6c_6172_4331; // "CellarC1"
const HAS_ROWS: u8 = 1;
const HAS_COLUMNS: u8 = 2;
const HEADER_LEN: usize = 11;
const MAX_PROBES: u32 = 30;

fn row_hash(row: &[u8]) -> u64 {
    xxh64(row, ROW_SEED)
}

/// `user_column` is `row_len: u16 BE | row | qualifier`, the key without its trailer.
fn column_hash(user_column: &[u8]) -> u64 {
    xxh64(user_column, COLUMN_SEED)
}

/// A row hashed once, for every bloom filter a read checks it against (a Get asks each store
/// file of each family; hashing per file was most of an absent row's cost).
#[derive(Debug, Clone, Copy)]
pub struct RowProbe<'a> {
    row: &'a [u8],
    hash: u64,
}

impl<'a> RowProbe<'a> {
    pub fn new(row: &'a [u8]) -> RowProbe<'a> {
        RowProbe {
            row,
            hash: row_hash(row),
        }
    }

    pub fn row(&self) -> &'a [u8] {
        self.row
    }
}

/// The bit positions of `hash`: `(h + i·δ) mod num_bits`, δ the hash rotated by 32 bits
/// (forced odd), i in 0..probes (Kirsch–Mitzenmacher double hashing).
#[inline]
fn probes(hash: u64, probes: u32, num_bits: u64) -> impl Iterator<Item = u64> {
    let delta = hash.rotate_left(32) | 1;
    (0..u64::from(probes)).map(move |i| hash.wrapping_add(i.wrapping_mul(delta)) % num_bits)
}

/// The bit positions of `hash` in the blocked layout: the block `⌊lo32(h) · blocks / 2^32⌋`
/// (a multiply instead of a modulo), then `k` bits inside it, each the top 9 bits of
/// `hi32(h)` remixed by multiplying with the 32-bit golden ratio between probes.
#[inline]
fn blocked_probes(hash: u64, probes: u32, num_bits: u64) -> impl Iterator<Item = u64> {
    let blocks = num_bits / BLOCK_BITS;
    let block = ((hash & 0xffff_ffff) * blocks) >> 32;
    let base = block * BLOCK_BITS;
    let mut h = (hash >> 32) as u32;
    (0..probes).map(move |_| {
        let bit = base + u64::from(h >> 23);
        h = h.wrapping_mul(0x9e37_79b9);
        bit
    })
}

/// Collects the hashes of a file's keys (sorted, so duplicates are adjacent and skipped).
pub(crate) struct BloomBuilder {
    bloom: BloomType,
    bits_per_key: u32,
    hashes: Vec<u64>,
    last_row: Vec<u8>,
    last_column: Vec<u8>,
    started: bool,
}

impl BloomBuilder {
    pub(crate) fn new(bloom: BloomType, bits_per_key: u32) -> BloomBuilder {
        BloomBuilder {
            bloom,
            bits_per_key: bits_per_key.max(1),
            hashes: Vec::new(),
            last_row: Vec::new(),
            last_column: Vec::new(),
            started: false,
        }
    }

    /// Records a key; keys come in ascending order.
    pub(crate) fn add(&mut self, key: &KeyRef<'_>) {
        if self.bloom == BloomType::None {
            return;
        }
        let first = !self.started;
        self.started = true;
        if first || key.row() != self.last_row.as_slice() {
            self.last_row.clear();
            self.last_row.extend_from_slice(key.row());
            self.hashes.push(row_hash(key.row()));
        }
        if self.bloom == BloomType::RowCol
            && (first || key.user_column() != self.last_column.as_slice())
        {
            self.last_column.clear();
            self.last_column.extend_from_slice(key.user_column());
            self.hashes.push(column_hash(key.user_column()));
        }
    }

    /// The encoded filter, or `None` when there is nothing to filter (no bloom, no keys).
    pub(crate) fn finish(&self) -> Option<Vec<u8>> {
        if self.bloom == BloomType::None || self.hashes.is_empty() {
            return None;
        }
        let n = self.hashes.len() as u64;
        let num_bits = (n * u64::from(self.bits_per_key))
            .div_ceil(BLOCK_BITS)
            .max(1)
            * BLOCK_BITS;
        // k = bits_per_key · ln 2 minimises the false-positive rate.
        let k = ((f64::from(self.bits_per_key) * std::f64::consts::LN_2).round() as u32)
            .clamp(1, MAX_PROBES);
        let contents = HAS_ROWS
            | if self.bloom == BloomType::RowCol {
                HAS_COLUMNS
            } else {
                0
            };
        let mut out = Vec::with_capacity(HEADER_LEN + (num_bits / 8) as usize);
        out.extend_from_slice(&[HASH_XXH64_BLOCKED, k as u8, contents]);
        out.extend_from_slice(&num_bits.to_le_bytes());
        out.resize(HEADER_LEN + (num_bits / 8) as usize, 0);
        let bits = out.get_mut(HEADER_LEN..).unwrap_or_default();
        for &h in &self.hashes {
            for bit in blocked_probes(h, k, num_bits) {
                if let Some(b) = bits.get_mut((bit / 8) as usize) {
                    *b |= 1 << (bit % 8);
                }
            }
        }
        Some(out)
    }
}

/// A loaded filter.
#[derive(Debug, Clone)]
pub(crate) struct BloomFilter {
    bits: Bytes,
    num_bits: u64,
    probes: u32,
    contents: u8,
    blocked: bool,
}

impl BloomFilter {
    /// Parses a filter block, checking its header against its length.
    pub(crate) fn decode(block: Bytes) -> DecodeResult<BloomFilter> {
        let header = block
            .get(..HEADER_LEN)
            .ok_or(Malformed("bloom block too short"))?;
        let &[hash_fn, probes, contents, ..] = header else {
            return Err(Malformed("bloom block too short"));
        };
        let blocked = match hash_fn {
            HASH_XXH64 => false,
            HASH_XXH64_BLOCKED => true,
            _ => return Err(Malformed("unknown bloom hash function")),
        };
        if probes == 0 || u32::from(probes) > MAX_PROBES {
            return Err(Malformed("bloom probe count out of range"));
        }
        if contents == 0 || contents & !(HAS_ROWS | HAS_COLUMNS) != 0 {
            return Err(Malformed("unknown bloom contents"));
        }
        let num_bits = get_u64_le(header, 3)?;
        let bits = block.slice(HEADER_LEN..);
        if num_bits == 0 || num_bits % 8 != 0 || num_bits / 8 != bits.len() as u64 {
            return Err(Malformed("bloom bit count does not match the block length"));
        }
        if blocked && num_bits % BLOCK_BITS != 0 {
            return Err(Malformed(
                "blocked bloom bit count is not a multiple of 512",
            ));
        }
        Ok(BloomFilter {
            bits,
            num_bits,
            probes: u32::from(probes),
            contents,
            blocked,
        })
    }

    fn check(&self, hash: u64) -> bool {
        let set = |bit: u64| {
            self.bits
                .get((bit / 8) as usize)
                .is_some_and(|b| b & (1 << (bit % 8)) != 0)
        };
        if self.blocked {
            blocked_probes(hash, self.probes, self.num_bits).all(set)
        } else {
            probes(hash, self.probes, self.num_bits).all(set)
        }
    }

    /// False only if no key of `row` was added.
    #[cfg(test)]
    pub(crate) fn may_contain_row(&self, row: &[u8]) -> bool {
        self.may_contain_probe(&RowProbe::new(row))
    }

    /// False only if no key of the probed row was added.
    pub(crate) fn may_contain_probe(&self, probe: &RowProbe<'_>) -> bool {
        self.contents & HAS_ROWS == 0 || self.check(probe.hash)
    }

    /// False only if no key of (`row`, `qualifier`) was added; a filter without column hashes
    /// answers for the row.
    pub(crate) fn may_contain_column(&self, row: &[u8], qualifier: &[u8]) -> bool {
        self.may_contain_probe_column(&RowProbe::new(row), qualifier)
    }

    /// [`BloomFilter::may_contain_column`] for a probed row.
    pub(crate) fn may_contain_probe_column(&self, probe: &RowProbe<'_>, qualifier: &[u8]) -> bool {
        if self.contents & HAS_COLUMNS == 0 {
            return self.may_contain_probe(probe);
        }
        let row = probe.row;
        let Ok(len) = u16::try_from(row.len()) else {
            return true;
        };
        let mut user_column = Vec::with_capacity(2 + row.len() + qualifier.len());
        user_column.extend_from_slice(&len.to_be_bytes());
        user_column.extend_from_slice(row);
        user_column.extend_from_slice(qualifier);
        self.check(column_hash(&user_column))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::key::make_key;
    use cellar_model::CellType;

    fn filter(bloom: BloomType, bits: u32, rows: u32, quals: u32) -> BloomFilter {
        let mut b = BloomBuilder::new(bloom, bits);
        for r in 0..rows {
            for q in 0..quals {
                for ts in [3, 2] {
                    let k = make_key(
                        format!("row{r}").as_bytes(),
                        format!("q{q}").as_bytes(),
                        ts,
                        CellType::Put,
                        1,
                    );
                    b.add(&KeyRef::parse(&k).expect("key"));
                }
            }
        }
        BloomFilter::decode(Bytes::from(b.finish().expect("filter"))).expect("decode")
    }

    #[test]
    fn no_false_negatives() {
        let f = filter(BloomType::RowCol, 10, 500, 4);
        for r in 0..500 {
            assert!(f.may_contain_row(format!("row{r}").as_bytes()));
            for q in 0..4 {
                assert!(
                    f.may_contain_column(format!("row{r}").as_bytes(), format!("q{q}").as_bytes())
                );
            }
        }
    }

    #[test]
    fn false_positive_rate_matches_bits_per_key() {
        // Expected rate: ~0.8% at 10 bits/key, ~2.2% at 8, ~9% at 5 (k = round(b·ln2)).
        for (bits, limit) in [(10u32, 0.02), (8, 0.04), (5, 0.14)] {
            let f = filter(BloomType::Row, bits, 10_000, 1);
            let trials = 20_000;
            let fp = (0..trials)
                .filter(|i| f.may_contain_row(format!("absent{i}").as_bytes()))
                .count();
            let rate = fp as f64 / f64::from(trials);
            assert!(rate < limit, "{bits} bits/key: rate {rate}");
            assert!(
                rate > 0.0 || bits >= 10,
                "{bits} bits/key: suspiciously perfect"
            );
        }
    }

    #[test]
    fn row_filter_answers_columns_by_row() {
        let f = filter(BloomType::Row, 10, 100, 2);
        assert!(f.may_contain_column(b"row7", b"anything"));
        let absent = (0..1000)
            .filter(|i| f.may_contain_column(format!("nope{i}").as_bytes(), b"q0"))
            .count();
        assert!(absent < 50);
    }

    #[test]
    fn decode_rejects_inconsistent_headers() {
        let good = filter(BloomType::Row, 10, 10, 1);
        let mut raw = vec![HASH_XXH64_BLOCKED, 7, HAS_ROWS];
        raw.extend_from_slice(&good.num_bits.to_le_bytes());
        raw.extend_from_slice(&good.bits);
        assert!(BloomFilter::decode(Bytes::from(raw.clone())).is_ok());
        for (i, v) in [
            (0, 9u8),
            (0, 0),
            (1, 0),
            (1, 31),
            (2, 0),
            (2, 8),
            (3, 1),
            (4, 1),
        ] {
            let mut bad = raw.clone();
            bad[i] = v;
            assert!(
                BloomFilter::decode(Bytes::from(bad)).is_err(),
                "byte {i} = {v}"
            );
        }
        assert!(BloomFilter::decode(Bytes::from(raw[..raw.len() - 1].to_vec())).is_err());
    }

    /// The whole-array layout of files written before the blocked one: built here by hand
    /// (the writer no longer makes it) and still answered correctly.
    #[test]
    fn whole_array_filters_are_still_read() {
        let rows: Vec<String> = (0..2000).map(|r| format!("row{r}")).collect();
        let (k, num_bits) = (7u32, 20_000u64);
        let mut raw = vec![HASH_XXH64, k as u8, HAS_ROWS];
        raw.extend_from_slice(&num_bits.to_le_bytes());
        raw.resize(HEADER_LEN + (num_bits / 8) as usize, 0);
        for r in &rows {
            for bit in probes(row_hash(r.as_bytes()), k, num_bits) {
                raw[HEADER_LEN + (bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        let f = BloomFilter::decode(Bytes::from(raw)).expect("decode");
        assert!(!f.blocked);
        assert!(rows.iter().all(|r| f.may_contain_row(r.as_bytes())));
        let fp = (0..10_000)
            .filter(|i| f.may_contain_row(format!("absent{i}").as_bytes()))
            .count();
        assert!(fp < 300, "{fp} false positives in 10000");
    }

    #[test]
    fn blocked_probes_stay_in_one_cache_line() {
        let num_bits = 64 * BLOCK_BITS;
        for h in [0u64, 1, u64::MAX, 0x1234_5678_9abc_def0, 0xffff_ffff] {
            let bits: Vec<u64> = blocked_probes(h, 7, num_bits).collect();
            assert_eq!(bits.len(), 7);
            let block = bits[0] / BLOCK_BITS;
            assert!(bits
                .iter()
                .all(|b| b / BLOCK_BITS == block && *b < num_bits));
        }
    }
}
