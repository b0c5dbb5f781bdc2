//! A bounds-checked reader over bytes from a file: every read says what it was reading when
//! the bytes run out, and nothing is allocated on a length that was not checked first.

/// Why bytes could not be read: a message naming the field.
pub type Bad = String;

/// Reads big-endian integers, HBase's variable-length integers and byte strings from a slice.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(bytes: &'a [u8]) -> Input<'a> {
        Input { bytes, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Bad> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end.and_then(|e| self.bytes.get(self.pos..e)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(format!(
                "{what}: {n} bytes needed, {} left",
                self.remaining()
            )),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Bad> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, Bad> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<u16, Bad> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, Bad> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub fn i32(&mut self, what: &str) -> Result<i32, Bad> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    /// A non-negative big-endian int used as a length.
    pub fn len32(&mut self, what: &str) -> Result<usize, Bad> {
        let v = self.i32(what)?;
        usize::try_from(v).map_err(|_| format!("{what}: negative length {v}"))
    }

    pub fn i64(&mut self, what: &str) -> Result<i64, Bad> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// Hadoop `WritableUtils` vlong: one byte for -112..=127, else a marker byte giving the
    /// sign and the count of big-endian bytes that follow.
    pub fn vlong(&mut self, what: &str) -> Result<i64, Bad> {
        let first = self.u8(what)? as i8;
        if first >= -112 {
            return Ok(i64::from(first));
        }
        let negative = first < -120;
        let n = if negative {
            -(i32::from(first) + 120)
        } else {
            -(i32::from(first) + 112)
        };
        let mut v: i64 = 0;
        for _ in 0..n {
            v = (v << 8) | i64::from(self.u8(what)?);
        }
        Ok(if negative { !v } else { v })
    }

    /// HBase's `ByteBufferUtils` compressed int: 7 bits a byte, low bits first, at most 5.
    pub fn cvarint(&mut self, what: &str) -> Result<usize, Bad> {
        let mut v: u64 = 0;
        for i in 0..5 {
            let b = self.u8(what)?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return usize::try_from(v).map_err(|_| format!("{what}: {v} is too large"));
            }
        }
        Err(format!("{what}: a compressed int longer than 5 bytes"))
    }

    /// A protobuf base-128 varint.
    pub fn pbvarint(&mut self, what: &str) -> Result<u64, Bad> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8(what)?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("{what}: a varint longer than 10 bytes"))
    }
}

/// The fields of a protobuf message, for the few small messages an HFile holds.
pub enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// Calls `f` with every `(field number, value)` of the protobuf message `msg`.
pub fn pb_fields<'a>(
    msg: &'a [u8],
    what: &str,
    mut f: impl FnMut(u64, Field<'a>) -> Result<(), Bad>,
) -> Result<(), Bad> {
    let mut input = Input::new(msg);
    while !input.is_empty() {
        let key = input.pbvarint(what)?;
        let (number, wire) = (key >> 3, key & 7);
        match wire {
            0 => f(number, Field::Varint(input.pbvarint(what)?))?,
            1 => {
                input.take(8, what)?;
            }
            2 => {
                let len = usize::try_from(input.pbvarint(what)?)
                    .map_err(|_| format!("{what}: field {number} is too long"))?;
                f(number, Field::Bytes(input.take(len, what)?))?;
            }
            5 => {
                input.take(4, what)?;
            }
            w => return Err(format!("{what}: field {number} has wire type {w}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hadoop's vlong, written by hand: what `WritableUtils.writeVLong` writes.
    fn write_vlong(mut v: i64) -> Vec<u8> {
        if (-112..=127).contains(&v) {
            return vec![v as u8];
        }
        let mut len: i32 = -112;
        if v < 0 {
            v = !v;
            len = -120;
        }
        let mut tmp = v;
        while tmp != 0 {
            tmp >>= 8;
            len -= 1;
        }
        let mut out = vec![len as u8];
        let n = if len < -120 {
            -(len + 120)
        } else {
            -(len + 112)
        };
        for i in (0..n).rev() {
            out.push((v >> (8 * i)) as u8);
        }
        out
    }

    #[test]
    fn vlongs_round_trip_hadoops_encoding() {
        for v in [
            0,
            1,
            -1,
            127,
            128,
            -112,
            -113,
            255,
            256,
            1 << 40,
            -(1 << 40),
            i64::MAX,
            i64::MIN,
        ] {
            let bytes = write_vlong(v);
            let mut input = Input::new(&bytes);
            assert_eq!(input.vlong("v").expect("vlong"), v, "{v}: {bytes:?}");
            assert!(input.is_empty());
        }
    }

    #[test]
    fn short_input_names_the_field() {
        let mut input = Input::new(&[1, 2]);
        let err = input.u32("block size").expect_err("short");
        assert!(err.contains("block size"), "{err}");
        assert_eq!(
            Input::new(&[0x81, 0x01]).cvarint("n").expect("cvarint"),
            129
        );
        assert!(Input::new(&[0x80; 6]).cvarint("n").is_err());
    }
}
