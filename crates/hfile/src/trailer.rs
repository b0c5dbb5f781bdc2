//! The fixed file trailer: the last 4096 bytes of an HFile v3 (212 of a v2 file), which say
//! where everything else is (`docs/hfile-format.md` §1).

use crate::compression::Codec;
use crate::input::{pb_fields, Bad, Field, Input};

/// The trailer's magic, `BlockType.TRAILER`.
const MAGIC: &[u8; 8] = b"TRABLK\"$";
/// Trailer sizes by major version.
pub const V3_SIZE: usize = 4096;
pub const V2_SIZE: usize = 212;

/// What the trailer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trailer {
    pub major: u32,
    pub minor: u32,
    /// Its size in bytes (the file's last bytes).
    pub size: usize,
    pub file_info_offset: u64,
    pub load_on_open_offset: u64,
    pub uncompressed_data_index_size: u64,
    pub total_uncompressed_bytes: u64,
    pub data_index_count: u32,
    pub meta_index_count: u32,
    /// Cells in the file.
    pub entry_count: u64,
    pub data_index_levels: u32,
    /// None when the file holds no cells.
    pub first_data_block_offset: Option<u64>,
    pub last_data_block_offset: u64,
    pub comparator: String,
    pub codec: Codec,
    /// The file is encrypted (a wrapped key is present): not readable here.
    pub encrypted: bool,
}

/// The trailer size for the version in a file's last four bytes (major in the low 24 bits,
/// minor in the high 8), or why such a file cannot be read.
pub fn size_for_version(version: u32) -> Result<(u32, u32, usize), Bad> {
    let (major, minor) = (version & 0x00ff_ffff, version >> 24);
    match (major, minor) {
        (3, _) => Ok((major, minor, V3_SIZE)),
        (2, m) if m >= 3 => Ok((major, minor, V2_SIZE)),
        _ if major == 0 || major > 3 => Err(format!(
            "not an HFile: its last four bytes ({version:08x}) are no HFile version"
        )),
        _ => Err(format!(
            "HFile version {major}.{minor} is not supported (HBase 2 writes 3.3; 2.3 and later are read)"
        )),
    }
}

impl Trailer {
    /// Parses the trailer bytes (exactly `size` of them, from the end of the file).
    pub fn parse(bytes: &[u8], major: u32, minor: u32) -> Result<Trailer, Bad> {
        let mut input = Input::new(bytes);
        let magic = input.take(8, "trailer magic")?;
        if magic != MAGIC {
            return Err(format!(
                "the trailer does not start with {:?} (found {:?}): not an HFile, or a damaged one",
                String::from_utf8_lossy(MAGIC),
                String::from_utf8_lossy(magic)
            ));
        }
        let len = usize::try_from(input.pbvarint("trailer length")?)
            .map_err(|_| "trailer length overflows".to_string())?;
        if len > bytes.len() {
            return Err(format!("the trailer claims {len} bytes of {}", bytes.len()));
        }
        let msg = input.take(len, "trailer message")?;
        let mut t = Trailer {
            major,
            minor,
            size: bytes.len(),
            file_info_offset: 0,
            load_on_open_offset: 0,
            uncompressed_data_index_size: 0,
            total_uncompressed_bytes: 0,
            data_index_count: 0,
            meta_index_count: 0,
            entry_count: 0,
            data_index_levels: 1,
            first_data_block_offset: None,
            last_data_block_offset: 0,
            comparator: String::new(),
            codec: Codec::None,
            encrypted: false,
        };
        let mut codec = None;
        pb_fields(msg, "trailer", |n, f| {
            let small = |v: u64| {
                u32::try_from(v).map_err(|_| format!("trailer field {n}: {v} is too large"))
            };
            match (n, f) {
                (1, Field::Varint(v)) => t.file_info_offset = v,
                (2, Field::Varint(v)) => t.load_on_open_offset = v,
                (3, Field::Varint(v)) => t.uncompressed_data_index_size = v,
                (4, Field::Varint(v)) => t.total_uncompressed_bytes = v,
                (5, Field::Varint(v)) => t.data_index_count = small(v)?,
                (6, Field::Varint(v)) => t.meta_index_count = small(v)?,
                (7, Field::Varint(v)) => t.entry_count = v,
                (8, Field::Varint(v)) => t.data_index_levels = small(v)?,
                (9, Field::Varint(v)) => t.first_data_block_offset = (v != u64::MAX).then_some(v),
                (10, Field::Varint(v)) => t.last_data_block_offset = v,
                (11, Field::Bytes(b)) => t.comparator = String::from_utf8_lossy(b).into_owned(),
                (12, Field::Varint(v)) => codec = Some(Codec::from_ordinal(v)?),
                (13, Field::Bytes(b)) => t.encrypted = !b.is_empty(),
                _ => {}
            }
            Ok(())
        })?;
        t.codec = codec.unwrap_or(Codec::None);
        if t.entry_count == 0 {
            t.first_data_block_offset = None;
        }
        Ok(t)
    }
}
