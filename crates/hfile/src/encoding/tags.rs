//! Tag compression in delta-coded blocks (`docs/hfile-format.md` §6.6): a tag is either a
//! literal (0xFF, varint length, bytes), added to a per-block dictionary of 127 entries, or a
//! 2-byte index into it. The dictionary is least-recently-used: a hit moves an entry to the
//! front, and an insert into a full one replaces the entry used longest ago, keeping its index.

use crate::input::{Bad, Input};

const CAPACITY: usize = 127;
const NOT_IN_DICTIONARY: u8 = 0xff;

pub(crate) struct TagDictionary {
    /// Entries by index.
    entries: Vec<Vec<u8>>,
    /// Indexes, most recently used first.
    order: Vec<usize>,
}

impl TagDictionary {
    pub fn new() -> TagDictionary {
        TagDictionary {
            entries: Vec::new(),
            order: Vec::new(),
        }
    }

    fn touch(&mut self, index: usize) {
        self.order.retain(|&i| i != index);
        self.order.insert(0, index);
    }

    fn add(&mut self, tag: &[u8]) {
        if tag.is_empty() {
            return;
        }
        let index = if self.entries.len() < CAPACITY {
            self.entries.push(tag.to_vec());
            self.entries.len() - 1
        } else {
            let Some(&oldest) = self.order.last() else {
                return;
            };
            if let Some(e) = self.entries.get_mut(oldest) {
                *e = tag.to_vec();
            }
            oldest
        };
        self.touch(index);
    }

    /// Reads tags until `len` bytes of the tags area (`[u16 length][tag]` each) are rebuilt.
    pub fn uncompress(&mut self, input: &mut Input<'_>, len: usize) -> Result<Vec<u8>, Bad> {
        let mut out = Vec::with_capacity(len.min(1 << 16));
        while out.len() < len {
            let status = input.u8("tag")?;
            let tag = if status == NOT_IN_DICTIONARY {
                let n = usize::try_from(input.pbvarint("tag length")?)
                    .map_err(|_| "tag length overflows".to_string())?;
                let tag = input.take(n, "tag")?.to_vec();
                self.add(&tag);
                tag
            } else {
                let index = usize::from(u16::from_be_bytes([status, input.u8("tag index")?]));
                let tag = self
                    .entries
                    .get(index)
                    .cloned()
                    .ok_or_else(|| format!("tag dictionary index {index} was never defined"))?;
                self.touch(index);
                tag
            };
            let n = u16::try_from(tag.len())
                .map_err(|_| "a tag longer than 65535 bytes".to_string())?;
            out.extend_from_slice(&n.to_be_bytes());
            out.extend_from_slice(&tag);
        }
        if out.len() != len {
            return Err(format!(
                "tags of {} bytes where {len} were announced",
                out.len()
            ));
        }
        Ok(out)
    }
}
