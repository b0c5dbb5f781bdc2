//! A node of the linked lists: one row, keyed by 16 random bytes, whose `node` family holds
//! the key of the node before it (`prev`, absent for the first nodes of a list not yet
//! closed), the writer that made it (`client`) and its number in that writer's sequence
//! (`count`, 8 bytes big-endian). The row layout is in `docs/chaos.md`.

use bytes::Bytes;
use cellar_client::{RowMutation, LATEST_TIMESTAMP};

/// The family holding a node's columns.
pub const FAMILY: &[u8] = b"node";
pub const PREV: &[u8] = b"prev";
pub const CLIENT: &[u8] = b"client";
pub const COUNT: &[u8] = b"count";

/// A node key.
pub type Key = [u8; 16];

/// One node as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub key: Key,
    pub prev: Option<Key>,
    pub client: Bytes,
    pub count: u64,
}

impl Node {
    /// The put that writes the node (all its columns, so rewriting it is idempotent).
    pub fn mutation(&self) -> RowMutation {
        let mut m = RowMutation::new(Bytes::copy_from_slice(&self.key))
            .put(FAMILY, CLIENT, LATEST_TIMESTAMP, self.client.clone())
            .put(
                FAMILY,
                COUNT,
                LATEST_TIMESTAMP,
                Bytes::copy_from_slice(&self.count.to_be_bytes()),
            );
        if let Some(p) = self.prev {
            m = m.put(FAMILY, PREV, LATEST_TIMESTAMP, Bytes::copy_from_slice(&p));
        }
        m
    }
}

/// A node key as hex, for messages.
pub fn hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// Split points for `regions` regions spread evenly over the random keys' space (the first
/// two bytes).
pub fn split_keys(regions: u32) -> Vec<Bytes> {
    let regions = regions.clamp(1, 65_536);
    (1..regions)
        .map(|i| {
            let at = u64::from(i) * 65_536 / u64::from(regions);
            let at = u16::try_from(at).unwrap_or(u16::MAX);
            Bytes::copy_from_slice(&at.to_be_bytes())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keys_are_sorted_and_spread() {
        assert!(split_keys(1).is_empty());
        let k = split_keys(4);
        assert_eq!(
            k,
            vec![
                Bytes::from_static(&[0x40, 0]),
                Bytes::from_static(&[0x80, 0]),
                Bytes::from_static(&[0xc0, 0])
            ]
        );
        let many = split_keys(1000);
        assert_eq!(many.len(), 999);
        assert!(many.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_node_writes_its_columns() {
        let n = Node {
            key: [7; 16],
            prev: Some([9; 16]),
            client: Bytes::from_static(b"w1"),
            count: 5,
        };
        let m = n.mutation();
        assert_eq!(&m.row[..], &[7; 16]);
        assert_eq!(m.entries.len(), 3, "{m:?}");
        let first = Node { prev: None, ..n };
        assert_eq!(first.mutation().entries.len(), 2);
        assert_eq!(hex(&[0, 0xab]), "00ab");
    }
}
