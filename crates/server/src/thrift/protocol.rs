//! Thrift's binary and compact protocols, read into and written from one generic [`Value`]
//! tree, so the gateway's handlers never see which protocol a client speaks.
//!
//! Binary (strict): a message starts `0x80 0x01 0x00 type`, then the name (i32 length +
//! bytes) and an i32 sequence id; integers are big-endian, strings and binaries i32-length
//! prefixed, a field is `type:u8 id:i16`, a struct ends with a 0 byte. The old non-strict
//! form (name first) is read too.
//!
//! Compact: a message starts `0x82`, then `version | type << 5`, a varint sequence id and a
//! varint-length name; integers are zigzag varints, a field header carries the id as a delta
//! from the previous field when it fits in 4 bits, and a bool field's value is its type.
//!
//! Reading stops with [`Error::Incomplete`] when the bytes end early (an error inside a
//! frame). An unframed connection does not decode until a call is whole: a [`Scanner`] finds
//! where it ends, keeping its place between reads. Both count the decoded size against
//! [`Limits::max_decoded`] before allocating.

use std::fmt;

/// Thrift's wire types (the binary protocol's numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TType {
    Bool,
    Byte,
    Double,
    I16,
    I32,
    I64,
    Binary,
    Struct,
    Map,
    Set,
    List,
}

impl TType {
    fn binary_id(self) -> u8 {
        match self {
            TType::Bool => 2,
            TType::Byte => 3,
            TType::Double => 4,
            TType::I16 => 6,
            TType::I32 => 8,
            TType::I64 => 10,
            TType::Binary => 11,
            TType::Struct => 12,
            TType::Map => 13,
            TType::Set => 14,
            TType::List => 15,
        }
    }

    fn from_binary(id: u8) -> Result<TType, Error> {
        Ok(match id {
            2 => TType::Bool,
            3 => TType::Byte,
            4 => TType::Double,
            6 => TType::I16,
            8 => TType::I32,
            10 => TType::I64,
            11 => TType::Binary,
            12 => TType::Struct,
            13 => TType::Map,
            14 => TType::Set,
            15 => TType::List,
            other => return Err(Error::invalid(format!("unknown field type {other}"))),
        })
    }

    fn compact_id(self) -> u8 {
        match self {
            TType::Bool => 1,
            TType::Byte => 3,
            TType::I16 => 4,
            TType::I32 => 5,
            TType::I64 => 6,
            TType::Double => 7,
            TType::Binary => 8,
            TType::List => 9,
            TType::Set => 10,
            TType::Map => 11,
            TType::Struct => 12,
        }
    }

    fn from_compact(id: u8) -> Result<TType, Error> {
        Ok(match id {
            1 | 2 => TType::Bool,
            3 => TType::Byte,
            4 => TType::I16,
            5 => TType::I32,
            6 => TType::I64,
            7 => TType::Double,
            8 => TType::Binary,
            9 => TType::List,
            10 => TType::Set,
            11 => TType::Map,
            12 => TType::Struct,
            other => return Err(Error::invalid(format!("unknown compact type {other}"))),
        })
    }
}

/// A decoded Thrift value. Sets are read as lists.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Byte(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    Double(f64),
    Binary(Vec<u8>),
    Struct(Vec<(i16, Value)>),
    List(TType, Vec<Value>),
    Map(TType, TType, Vec<(Value, Value)>),
}

impl Value {
    pub fn ttype(&self) -> TType {
        match self {
            Value::Bool(_) => TType::Bool,
            Value::Byte(_) => TType::Byte,
            Value::I16(_) => TType::I16,
            Value::I32(_) => TType::I32,
            Value::I64(_) => TType::I64,
            Value::Double(_) => TType::Double,
            Value::Binary(_) => TType::Binary,
            Value::Struct(_) => TType::Struct,
            Value::List(..) => TType::List,
            Value::Map(..) => TType::Map,
        }
    }

    /// A string or binary value.
    pub fn text(s: impl Into<Vec<u8>>) -> Value {
        Value::Binary(s.into())
    }
}

/// Which protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Binary,
    Compact,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Binary => "binary",
            Protocol::Compact => "compact",
        })
    }
}

/// Thrift message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    Call = 1,
    Reply = 2,
    Exception = 3,
    Oneway = 4,
}

impl MessageType {
    fn from_u8(v: u8) -> Result<MessageType, Error> {
        Ok(match v {
            1 => MessageType::Call,
            2 => MessageType::Reply,
            3 => MessageType::Exception,
            4 => MessageType::Oneway,
            other => return Err(Error::invalid(format!("unknown message type {other}"))),
        })
    }
}

/// One decoded message: its header and its argument (or result) struct.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub name: String,
    pub kind: MessageType,
    pub seq: i32,
    pub body: Vec<(i16, Value)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The bytes ended inside the message.
    Incomplete,
    /// The bytes are not a Thrift message of this protocol.
    Invalid(String),
}

impl Error {
    fn invalid(msg: impl Into<String>) -> Error {
        Error::Invalid(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Incomplete => f.write_str("the message ends early"),
            Error::Invalid(m) => f.write_str(m),
        }
    }
}

/// Limits on what one message may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Nesting of structs, lists and maps.
    pub max_depth: usize,
    /// Length of one string or binary.
    pub max_string: usize,
    /// The decoded message's size in memory (see [`decoded_size`]): a one-byte bool on the
    /// wire is a 32-byte [`Value`], so without this a message could take 32 times its size
    /// (or more) once read.
    pub max_decoded: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 32,
            max_string: 64 << 20,
            max_decoded: 128 << 20,
        }
    }
}

/// What a list or set element counts against [`Limits::max_decoded`]: its [`Value`].
pub const ELEMENT_SIZE: usize = std::mem::size_of::<Value>();
/// What a struct field counts: its id and [`Value`].
pub const FIELD_SIZE: usize = std::mem::size_of::<(i16, Value)>();
/// What a map entry counts: its key and value.
pub const ENTRY_SIZE: usize = std::mem::size_of::<(Value, Value)>();

/// A decoded message's size as [`Limits::max_decoded`] counts it: the method name's and every
/// string's bytes, [`FIELD_SIZE`] a struct field, [`ELEMENT_SIZE`] a list element,
/// [`ENTRY_SIZE`] a map entry. That is the memory its values take, but for the spare room of
/// struct field vectors (which grow by doubling).
pub fn decoded_size(msg: &Message) -> usize {
    fn value(v: &Value) -> usize {
        match v {
            Value::Binary(b) => b.len(),
            Value::Struct(fields) => fields.iter().map(|(_, v)| FIELD_SIZE + value(v)).sum(),
            Value::List(_, items) => items.iter().map(|v| ELEMENT_SIZE + value(v)).sum(),
            Value::Map(_, _, items) => items
                .iter()
                .map(|(k, v)| ENTRY_SIZE + value(k) + value(v))
                .sum(),
            _ => 0,
        }
    }
    msg.name.len()
        + msg
            .body
            .iter()
            .map(|(_, v)| FIELD_SIZE + value(v))
            .sum::<usize>()
}

/// Reads one message from the start of `buf`; returns it and the bytes it took.
pub fn read_message(
    buf: &[u8],
    protocol: Protocol,
    limits: Limits,
) -> Result<(Message, usize), Error> {
    let mut r = Reader {
        buf,
        pos: 0,
        protocol,
        limits,
        last_field: Vec::new(),
        field_id: 0,
        pending_bool: None,
        decoded: 0,
    };
    let (name, kind, seq) = r.message_begin()?;
    let body = r.struct_fields(0)?;
    Ok((
        Message {
            name,
            kind,
            seq,
            body,
        },
        r.pos,
    ))
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    protocol: Protocol,
    limits: Limits,
    /// Compact protocol: the last field id of each enclosing struct.
    last_field: Vec<i16>,
    field_id: i16,
    /// Compact protocol: a bool field's value, carried in its header.
    pending_bool: Option<bool>,
    /// What the values read so far take in memory, counted before each is made.
    decoded: usize,
}

impl Reader<'_> {
    /// Counts `n` more decoded bytes against [`Limits::max_decoded`]; called before the
    /// memory is allocated.
    fn charge(&mut self, n: usize) -> Result<(), Error> {
        match self.decoded.checked_add(n) {
            Some(total) if total <= self.limits.max_decoded => {
                self.decoded = total;
                Ok(())
            }
            _ => Err(Error::invalid(format!(
                "the message is over the limit of {} bytes decoded",
                self.limits.max_decoded
            ))),
        }
    }

    /// Counts `n` elements of `size` bytes each.
    fn charge_items(&mut self, n: usize, size: usize) -> Result<(), Error> {
        self.charge(n.saturating_mul(size))
    }

    fn take(&mut self, n: usize) -> Result<&[u8], Error> {
        let s = self
            .buf
            .get(self.pos..)
            .and_then(|rest| rest.get(..n))
            .ok_or(Error::Incomplete)?;
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, Error> {
        let [b] = self.array::<1>()?;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(Error::invalid("varint longer than 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::invalid("varint longer than 10 bytes"))
    }

    fn zigzag(&mut self) -> Result<i64, Error> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn len(&mut self, what: &str) -> Result<usize, Error> {
        let n = match self.protocol {
            Protocol::Binary => {
                let n = i32::from_be_bytes(self.array()?);
                if n < 0 {
                    return Err(Error::invalid(format!("negative {what} length {n}")));
                }
                n as usize
            }
            Protocol::Compact => {
                let n = self.varint()?;
                usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= i32::MAX as usize)
                    .ok_or_else(|| Error::invalid(format!("{what} length {n} too large")))?
            }
        };
        Ok(n)
    }

    fn binary(&mut self) -> Result<Vec<u8>, Error> {
        let n = self.len("string")?;
        if n > self.limits.max_string {
            return Err(Error::invalid(format!(
                "string of {n} bytes is over the limit of {}",
                self.limits.max_string
            )));
        }
        self.charge(n)?;
        Ok(self.take(n)?.to_vec())
    }

    /// Steps over a string or binary, counting it as [`Reader::binary`] does.
    fn skip_binary(&mut self) -> Result<(), Error> {
        let n = self.len("string")?;
        if n > self.limits.max_string {
            return Err(Error::invalid(format!(
                "string of {n} bytes is over the limit of {}",
                self.limits.max_string
            )));
        }
        self.charge(n)?;
        self.take(n).map(|_| ())
    }

    fn message_begin(&mut self) -> Result<(String, MessageType, i32), Error> {
        match self.protocol {
            Protocol::Binary => {
                let first = i32::from_be_bytes(self.array()?);
                if first < 0 {
                    let version = (first as u32) & 0xffff_0000;
                    if version != 0x8001_0000 {
                        return Err(Error::invalid(format!(
                            "bad binary protocol version {version:#x}"
                        )));
                    }
                    let kind = MessageType::from_u8((first & 0xff) as u8)?;
                    let name = self.binary()?;
                    let seq = i32::from_be_bytes(self.array()?);
                    Ok((name_text(name)?, kind, seq))
                } else {
                    // Non-strict: the name's length came first.
                    let n = first as usize;
                    if n > 1024 {
                        return Err(Error::invalid(format!("method name of {n} bytes")));
                    }
                    self.charge(n)?;
                    let name = self.take(n)?.to_vec();
                    let kind = MessageType::from_u8(self.u8()?)?;
                    let seq = i32::from_be_bytes(self.array()?);
                    Ok((name_text(name)?, kind, seq))
                }
            }
            Protocol::Compact => {
                let id = self.u8()?;
                if id != 0x82 {
                    return Err(Error::invalid(format!(
                        "bad compact protocol id {id:#x} (expected 0x82)"
                    )));
                }
                let vt = self.u8()?;
                if vt & 0x1f != 1 {
                    return Err(Error::invalid(format!(
                        "bad compact protocol version {}",
                        vt & 0x1f
                    )));
                }
                let kind = MessageType::from_u8(vt >> 5)?;
                let seq = self.varint()? as u32 as i32;
                let name = self.binary()?;
                Ok((name_text(name)?, kind, seq))
            }
        }
    }

    /// Reads a struct's fields up to its stop byte.
    fn struct_fields(&mut self, depth: usize) -> Result<Vec<(i16, Value)>, Error> {
        if depth > self.limits.max_depth {
            return Err(Error::invalid("values nested too deeply"));
        }
        self.last_field.push(self.field_id);
        self.field_id = 0;
        let mut fields = Vec::new();
        while let Some((ttype, id)) = self.field_begin()? {
            self.charge(FIELD_SIZE)?;
            let v = self.value(ttype, depth + 1)?;
            fields.push((id, v));
        }
        self.field_id = self.last_field.pop().unwrap_or(0);
        Ok(fields)
    }

    fn field_begin(&mut self) -> Result<Option<(TType, i16)>, Error> {
        match self.protocol {
            Protocol::Binary => {
                let t = self.u8()?;
                if t == 0 {
                    return Ok(None);
                }
                let ttype = TType::from_binary(t)?;
                let id = i16::from_be_bytes(self.array()?);
                Ok(Some((ttype, id)))
            }
            Protocol::Compact => {
                let b = self.u8()?;
                if b == 0 {
                    return Ok(None);
                }
                let ct = b & 0x0f;
                let delta = b >> 4;
                let id = if delta != 0 {
                    self.field_id.wrapping_add(i16::from(delta))
                } else {
                    let z = self.zigzag()?;
                    i16::try_from(z).map_err(|_| Error::invalid(format!("field id {z}")))?
                };
                self.field_id = id;
                let ttype = TType::from_compact(ct)?;
                if ttype == TType::Bool {
                    self.pending_bool = Some(ct == 1);
                }
                Ok(Some((ttype, id)))
            }
        }
    }

    fn value(&mut self, ttype: TType, depth: usize) -> Result<Value, Error> {
        Ok(match ttype {
            TType::Bool => match self.pending_bool.take() {
                Some(b) => Value::Bool(b),
                None => Value::Bool(self.u8()? == 1),
            },
            TType::Byte => Value::Byte(self.u8()? as i8),
            TType::I16 => Value::I16(match self.protocol {
                Protocol::Binary => i16::from_be_bytes(self.array()?),
                Protocol::Compact => self.zigzag()? as i16,
            }),
            TType::I32 => Value::I32(match self.protocol {
                Protocol::Binary => i32::from_be_bytes(self.array()?),
                Protocol::Compact => self.zigzag()? as i32,
            }),
            TType::I64 => Value::I64(match self.protocol {
                Protocol::Binary => i64::from_be_bytes(self.array()?),
                Protocol::Compact => self.zigzag()?,
            }),
            TType::Double => Value::Double(match self.protocol {
                Protocol::Binary => f64::from_be_bytes(self.array()?),
                Protocol::Compact => f64::from_le_bytes(self.array()?),
            }),
            TType::Binary => Value::Binary(self.binary()?),
            TType::Struct => Value::Struct(self.struct_fields(depth)?),
            TType::List | TType::Set => {
                if depth > self.limits.max_depth {
                    return Err(Error::invalid("values nested too deeply"));
                }
                let (etype, n) = self.list_begin()?;
                // Counted whole before any room is reserved: its decoded size is bounded by
                // the limit, and the count by the bytes left.
                self.charge_items(n, ELEMENT_SIZE)?;
                let n = self.count(n)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(etype, depth + 1)?);
                }
                Value::List(etype, items)
            }
            TType::Map => {
                if depth > self.limits.max_depth {
                    return Err(Error::invalid("values nested too deeply"));
                }
                let (kt, vt, n) = self.map_begin()?;
                self.charge_items(n, ENTRY_SIZE)?;
                let n = self.count(n)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = self.value(kt, depth + 1)?;
                    let v = self.value(vt, depth + 1)?;
                    items.push((k, v));
                }
                Value::Map(kt, vt, items)
            }
        })
    }

    /// A container's element count, checked against the bytes left: every element takes
    /// at least one byte, so a larger count cannot be real (in a frame) or is not here yet.
    fn count(&mut self, n: usize) -> Result<usize, Error> {
        if n > self.buf.len() - self.pos {
            return Err(Error::Incomplete);
        }
        Ok(n)
    }

    /// A list's element type and count (not yet checked against the bytes left).
    fn list_begin(&mut self) -> Result<(TType, usize), Error> {
        match self.protocol {
            Protocol::Binary => {
                let etype = TType::from_binary(self.u8()?)?;
                let n = self.len("list")?;
                Ok((etype, n))
            }
            Protocol::Compact => {
                let b = self.u8()?;
                let etype = TType::from_compact(b & 0x0f)?;
                let n = if b >> 4 == 0x0f {
                    self.len("list")?
                } else {
                    usize::from(b >> 4)
                };
                Ok((etype, n))
            }
        }
    }

    /// A map's key and value types and count (not yet checked against the bytes left).
    fn map_begin(&mut self) -> Result<(TType, TType, usize), Error> {
        match self.protocol {
            Protocol::Binary => {
                let kt = TType::from_binary(self.u8()?)?;
                let vt = TType::from_binary(self.u8()?)?;
                let n = self.len("map")?;
                Ok((kt, vt, n))
            }
            Protocol::Compact => {
                let n = self.len("map")?;
                if n == 0 {
                    return Ok((TType::Binary, TType::Binary, 0));
                }
                let b = self.u8()?;
                let kt = TType::from_compact(b >> 4)?;
                let vt = TType::from_compact(b & 0x0f)?;
                Ok((kt, vt, n))
            }
        }
    }
}

/// Finds where a message ends in bytes that arrive a few at a time (an unframed connection),
/// without decoding it. It keeps how far it got between calls: each call goes on from the
/// last whole item (a field header and its value's first part, a number, a string's length),
/// and a string's bytes are counted, not read, so the work over all the reads of a message
/// is linear in its size, however it arrives. It applies the reader's limits (nesting,
/// string lengths, the decoded size, counted as the reader counts it) as it goes, so a
/// message over them is refused as soon as the offending header arrives.
pub struct Scanner {
    protocol: Protocol,
    limits: Limits,
    /// The message's bytes accepted so far: always between two items.
    pos: usize,
    /// The decoded size of what was accepted.
    decoded: usize,
    /// The message's header has been read.
    begun: bool,
    /// The containers open at `pos`, innermost last (the message's body first).
    open: Vec<Open>,
    /// Bytes examined, over every call (a measure of the work done).
    pub examined: u64,
}

/// A container the scanner is inside.
enum Open {
    /// A struct, with the id of its last field (the compact protocol's deltas).
    Struct(i16),
    /// A list or set: its element type and the elements still to come.
    List(TType, usize),
    /// A map: its key and value types and the keys and values still to come (a key when
    /// even).
    Map(TType, TType, usize),
}

impl Scanner {
    pub fn new(protocol: Protocol, limits: Limits) -> Scanner {
        Scanner {
            protocol,
            limits,
            pos: 0,
            decoded: 0,
            begun: false,
            open: Vec::new(),
            examined: 0,
        }
    }

    /// Forgets the message, to look for the next one (`examined` goes on counting).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.decoded = 0;
        self.begun = false;
        self.open.clear();
    }

    /// The message's length once `buf` (the bytes from its start; each call's `buf` begins
    /// with the previous one's) holds all of it; `None` until then.
    pub fn advance(&mut self, buf: &[u8]) -> Result<Option<usize>, Error> {
        let mut r = Reader {
            buf,
            pos: self.pos,
            protocol: self.protocol,
            limits: self.limits,
            last_field: Vec::new(),
            field_id: 0,
            pending_bool: None,
            decoded: self.decoded,
        };
        loop {
            if self.begun && self.open.is_empty() {
                return Ok(Some(self.pos));
            }
            let start = r.pos;
            let step = self.step(&mut r);
            self.examined += (r.pos - start) as u64;
            match step {
                Ok(()) => {
                    self.pos = r.pos;
                    self.decoded = r.decoded;
                }
                // Nothing of the unfinished item is kept: the next call reads it again.
                Err(Error::Incomplete) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads one item at `r.pos`; `self.open` changes only once the whole item was there.
    fn step(&mut self, r: &mut Reader) -> Result<(), Error> {
        r.pending_bool = None;
        if !self.begun {
            r.message_begin()?;
            self.open.push(Open::Struct(0));
            self.begun = true;
            return Ok(());
        }
        let depth = self.open.len();
        let Some(top) = self.open.last_mut() else {
            return Ok(());
        };
        match top {
            Open::Struct(last) => {
                r.field_id = *last;
                match r.field_begin()? {
                    None => {
                        self.open.pop();
                    }
                    Some((ttype, _)) => {
                        r.charge(FIELD_SIZE)?;
                        let inner = value_begin(r, ttype, depth)?;
                        *last = r.field_id;
                        self.open.extend(inner);
                    }
                }
            }
            Open::List(_, 0) | Open::Map(_, _, 0) => {
                self.open.pop();
            }
            Open::List(etype, left) => {
                let inner = value_begin(r, *etype, depth)?;
                *left -= 1;
                self.open.extend(inner);
            }
            Open::Map(kt, vt, left) => {
                let t = if *left % 2 == 0 { *kt } else { *vt };
                let inner = value_begin(r, t, depth)?;
                *left -= 1;
                self.open.extend(inner);
            }
        }
        Ok(())
    }
}

/// Reads a value of `ttype` at `depth` if it is not a container, else its header: the
/// container it opens.
fn value_begin(r: &mut Reader, ttype: TType, depth: usize) -> Result<Option<Open>, Error> {
    let container = matches!(ttype, TType::Struct | TType::List | TType::Set | TType::Map);
    if container && depth > r.limits.max_depth {
        return Err(Error::invalid("values nested too deeply"));
    }
    Ok(match ttype {
        TType::Struct => Some(Open::Struct(0)),
        TType::List | TType::Set => {
            let (etype, n) = r.list_begin()?;
            r.charge_items(n, ELEMENT_SIZE)?;
            Some(Open::List(etype, n))
        }
        TType::Map => {
            let (kt, vt, n) = r.map_begin()?;
            r.charge_items(n, ENTRY_SIZE)?;
            Some(Open::Map(kt, vt, n.saturating_mul(2)))
        }
        TType::Binary => {
            r.skip_binary()?;
            None
        }
        _ => {
            r.value(ttype, depth)?;
            None
        }
    })
}

fn name_text(name: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(name).map_err(|_| Error::invalid("method name is not UTF-8"))
}

/// Writes one message (header and body struct) in `protocol`, appending to `out`.
pub fn write_message(
    out: &mut Vec<u8>,
    protocol: Protocol,
    name: &str,
    kind: MessageType,
    seq: i32,
    body: &[(i16, Value)],
) {
    let mut w = Writer {
        out,
        protocol,
        field_id: 0,
    };
    match protocol {
        Protocol::Binary => {
            w.out
                .extend_from_slice(&(0x8001_0000u32 | kind as u32).to_be_bytes());
            w.binary(name.as_bytes());
            w.out.extend_from_slice(&seq.to_be_bytes());
        }
        Protocol::Compact => {
            w.out.push(0x82);
            w.out.push(1 | ((kind as u8) << 5));
            w.varint(u64::from(seq as u32));
            w.binary(name.as_bytes());
        }
    }
    w.struct_fields(body);
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
    protocol: Protocol,
    field_id: i16,
}

impl Writer<'_> {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn zigzag(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn len(&mut self, n: usize) {
        match self.protocol {
            Protocol::Binary => self.out.extend_from_slice(&(n as i32).to_be_bytes()),
            Protocol::Compact => self.varint(n as u64),
        }
    }

    fn binary(&mut self, b: &[u8]) {
        self.len(b.len());
        self.out.extend_from_slice(b);
    }

    fn struct_fields(&mut self, fields: &[(i16, Value)]) {
        let outer = self.field_id;
        self.field_id = 0;
        for (id, v) in fields {
            self.field(*id, v);
        }
        self.out.push(0);
        self.field_id = outer;
    }

    fn field(&mut self, id: i16, v: &Value) {
        match self.protocol {
            Protocol::Binary => {
                self.out.push(v.ttype().binary_id());
                self.out.extend_from_slice(&id.to_be_bytes());
                self.value(v);
            }
            Protocol::Compact => {
                let ct = match v {
                    Value::Bool(true) => 1,
                    Value::Bool(false) => 2,
                    other => other.ttype().compact_id(),
                };
                let delta = i32::from(id) - i32::from(self.field_id);
                if (1..=15).contains(&delta) {
                    self.out.push(((delta as u8) << 4) | ct);
                } else {
                    self.out.push(ct);
                    self.zigzag(i64::from(id));
                }
                self.field_id = id;
                if !matches!(v, Value::Bool(_)) {
                    self.value(v);
                }
            }
        }
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Bool(b) => match self.protocol {
                Protocol::Binary => self.out.push(u8::from(*b)),
                Protocol::Compact => self.out.push(if *b { 1 } else { 2 }),
            },
            Value::Byte(b) => self.out.push(*b as u8),
            Value::I16(i) => match self.protocol {
                Protocol::Binary => self.out.extend_from_slice(&i.to_be_bytes()),
                Protocol::Compact => self.zigzag(i64::from(*i)),
            },
            Value::I32(i) => match self.protocol {
                Protocol::Binary => self.out.extend_from_slice(&i.to_be_bytes()),
                Protocol::Compact => self.zigzag(i64::from(*i)),
            },
            Value::I64(i) => match self.protocol {
                Protocol::Binary => self.out.extend_from_slice(&i.to_be_bytes()),
                Protocol::Compact => self.zigzag(*i),
            },
            Value::Double(d) => match self.protocol {
                Protocol::Binary => self.out.extend_from_slice(&d.to_be_bytes()),
                Protocol::Compact => self.out.extend_from_slice(&d.to_le_bytes()),
            },
            Value::Binary(b) => self.binary(b),
            Value::Struct(fields) => self.struct_fields(fields),
            Value::List(etype, items) => {
                match self.protocol {
                    Protocol::Binary => {
                        self.out.push(etype.binary_id());
                        self.len(items.len());
                    }
                    Protocol::Compact => {
                        let ct = etype.compact_id();
                        if items.len() < 15 {
                            self.out.push(((items.len() as u8) << 4) | ct);
                        } else {
                            self.out.push(0xf0 | ct);
                            self.varint(items.len() as u64);
                        }
                    }
                }
                for item in items {
                    self.value(item);
                }
            }
            Value::Map(kt, vt, items) => {
                match self.protocol {
                    Protocol::Binary => {
                        self.out.push(kt.binary_id());
                        self.out.push(vt.binary_id());
                        self.len(items.len());
                    }
                    Protocol::Compact => {
                        self.varint(items.len() as u64);
                        if !items.is_empty() {
                            self.out.push((kt.compact_id() << 4) | vt.compact_id());
                        }
                    }
                }
                for (k, v) in items {
                    self.value(k);
                    self.value(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<(i16, Value)> {
        vec![
            (1, Value::text("table")),
            (2, Value::Bool(true)),
            (3, Value::Bool(false)),
            (4, Value::I64(-5_000_000_000)),
            (5, Value::I32(-7)),
            (6, Value::I16(300)),
            (7, Value::Byte(-1)),
            (8, Value::Double(1.5)),
            (
                9,
                Value::List(
                    TType::Struct,
                    (0..20)
                        .map(|i| Value::Struct(vec![(1, Value::I32(i)), (40, Value::Bool(true))]))
                        .collect(),
                ),
            ),
            (
                10,
                Value::Map(
                    TType::Binary,
                    TType::Binary,
                    vec![(Value::text("k"), Value::text("v"))],
                ),
            ),
            (11, Value::Map(TType::Binary, TType::Binary, vec![])),
            (
                300,
                Value::List(TType::Bool, vec![Value::Bool(true), Value::Bool(false)]),
            ),
        ]
    }

    #[test]
    fn both_protocols_round_trip_every_type() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut out = Vec::new();
            write_message(
                &mut out,
                protocol,
                "getRow",
                MessageType::Call,
                77,
                &sample(),
            );
            let (msg, used) = read_message(&out, protocol, Limits::default()).expect("a value");
            assert_eq!(used, out.len(), "{protocol}");
            assert_eq!(msg.name, "getRow");
            assert_eq!(msg.kind, MessageType::Call);
            assert_eq!(msg.seq, 77);
            assert_eq!(msg.body, sample(), "{protocol}");
        }
    }

    #[test]
    fn every_prefix_is_incomplete_not_wrong() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut out = Vec::new();
            write_message(&mut out, protocol, "x", MessageType::Call, 1, &sample());
            for cut in 0..out.len() {
                assert_eq!(
                    read_message(&out[..cut], protocol, Limits::default()).expect_err("an error"),
                    Error::Incomplete,
                    "{protocol} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn known_bytes_of_each_protocol() {
        // A strict binary call of "ping" with seq 1 and an empty argument struct.
        let mut out = Vec::new();
        write_message(
            &mut out,
            Protocol::Binary,
            "ping",
            MessageType::Call,
            1,
            &[],
        );
        assert_eq!(
            out,
            [0x80, 1, 0, 1, 0, 0, 0, 4, b'p', b'i', b'n', b'g', 0, 0, 0, 1, 0]
        );
        // Compact: 0x82, version 1 | CALL << 5, seq varint, name, field 1 i32 = -1.
        let mut out = Vec::new();
        write_message(
            &mut out,
            Protocol::Compact,
            "ping",
            MessageType::Call,
            1,
            &[(1, Value::I32(-1))],
        );
        assert_eq!(out, [0x82, 0x21, 1, 4, b'p', b'i', b'n', b'g', 0x15, 1, 0]);
    }

    #[test]
    fn non_strict_binary_is_read() {
        let mut buf = vec![0, 0, 0, 3];
        buf.extend_from_slice(b"get");
        buf.push(1);
        buf.extend_from_slice(&9i32.to_be_bytes());
        buf.push(0);
        let (msg, _) = read_message(&buf, Protocol::Binary, Limits::default()).expect("a value");
        assert_eq!((msg.name.as_str(), msg.seq), ("get", 9));
    }

    #[test]
    fn bad_input_is_named() {
        let bad = [0x80, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let e = read_message(&bad, Protocol::Binary, Limits::default()).expect_err("an error");
        assert!(e.to_string().contains("version"), "{e}");
        let e = read_message(&[0x81, 0x21], Protocol::Compact, Limits::default())
            .expect_err("an error");
        assert!(e.to_string().contains("0x82"), "{e}");
        // A field of an unknown type.
        let mut out = Vec::new();
        write_message(&mut out, Protocol::Binary, "x", MessageType::Call, 1, &[]);
        let last = out.len() - 1;
        out[last] = 9;
        out.extend_from_slice(&[0, 1, 0]);
        let e = read_message(&out, Protocol::Binary, Limits::default()).expect_err("an error");
        assert!(e.to_string().contains("unknown field type 9"), "{e}");
        // Deep nesting stops at the limit.
        let limits = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        let mut v = Value::I32(1);
        for _ in 0..6 {
            v = Value::Struct(vec![(1, v)]);
        }
        let mut out = Vec::new();
        write_message(
            &mut out,
            Protocol::Compact,
            "x",
            MessageType::Call,
            1,
            &[(1, v)],
        );
        let e = read_message(&out, Protocol::Compact, limits).expect_err("an error");
        assert!(e.to_string().contains("nested"), "{e}");
    }

    /// A call whose argument 1 is a list of `n` elements of `etype`, each element `elem`
    /// (written by hand: building the values first would take the memory under test).
    fn list_call(protocol: Protocol, etype: TType, elem: &[u8], n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        write_message(&mut out, protocol, "x", MessageType::Call, 1, &[]);
        out.pop(); // the empty body's stop byte
        match protocol {
            Protocol::Binary => {
                out.extend_from_slice(&[TType::List.binary_id(), 0, 1, etype.binary_id()]);
                out.extend_from_slice(&(n as i32).to_be_bytes());
            }
            Protocol::Compact => {
                out.push(0x10 | TType::List.compact_id());
                out.push(0xf0 | etype.compact_id());
                let mut w = Writer {
                    out: &mut out,
                    protocol,
                    field_id: 0,
                };
                w.varint(n as u64);
            }
        }
        for _ in 0..n {
            out.extend_from_slice(elem);
        }
        out.push(0);
        out
    }

    /// 8 Mi one-byte elements (bools, bytes, empty structs) are 8 MiB on the wire and would be
    /// 256 MiB decoded (32 bytes a value): the reader refuses them against its decoded-size
    /// limit when it reads the list's count, before reserving room for any.
    #[test]
    fn a_list_of_many_one_byte_values_is_refused_before_it_is_decoded() {
        let n = 8 << 20;
        for protocol in [Protocol::Binary, Protocol::Compact] {
            for (etype, elem) in [
                (TType::Bool, [1u8]),
                (TType::Byte, [7]),
                (TType::Struct, [0]),
            ] {
                let call = list_call(protocol, etype, &elem, n);
                assert!(call.len() < n + 32);
                let e = read_message(&call, protocol, Limits::default())
                    .map(|(m, _)| m.body.len())
                    .expect_err("an error");
                assert!(
                    e.to_string().contains("decoded"),
                    "{protocol} {etype:?}: {e}"
                );
            }
        }
    }

    /// Feeds `bytes` to a scanner `chunk` bytes at a time: the length it finds, or its error.
    fn scan(
        bytes: &[u8],
        protocol: Protocol,
        limits: Limits,
        chunk: usize,
    ) -> Result<usize, Error> {
        let mut s = Scanner::new(protocol, limits);
        for end in (chunk..bytes.len() + chunk).step_by(chunk) {
            if let Some(n) = s.advance(&bytes[..end.min(bytes.len())])? {
                return Ok(n);
            }
        }
        Err(Error::Incomplete)
    }

    #[test]
    fn the_scanner_finds_where_each_message_ends() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut out = Vec::new();
            write_message(
                &mut out,
                protocol,
                "getRow",
                MessageType::Call,
                7,
                &sample(),
            );
            let len = out.len();
            // Another message after it is not looked at.
            out.extend_from_slice(&[0x80, 1]);
            for chunk in [1, 2, 5, 64, out.len()] {
                assert_eq!(
                    scan(&out, protocol, Limits::default(), chunk),
                    Ok(len),
                    "{protocol} in pieces of {chunk}"
                );
            }
            for cut in 0..len {
                assert_eq!(
                    scan(&out[..cut], protocol, Limits::default(), 3),
                    Err(Error::Incomplete),
                    "{protocol} cut at {cut}"
                );
            }
            // After a reset it finds the next message.
            let mut s = Scanner::new(protocol, Limits::default());
            let mut two = out[..len].to_vec();
            two.extend_from_slice(&out[..len]);
            assert_eq!(s.advance(&two), Ok(Some(len)));
            s.reset();
            assert_eq!(s.advance(&two[len..]), Ok(Some(len)));
        }
        // The reader's checks are the scanner's.
        let e = scan(
            &[0x80, 2, 0, 1, 0, 0, 0, 0],
            Protocol::Binary,
            Limits::default(),
            1,
        );
        assert!(
            matches!(&e, Err(Error::Invalid(m)) if m.contains("version")),
            "{e:?}"
        );
        let limits = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        let mut v = Value::List(TType::I32, vec![]);
        for _ in 0..6 {
            v = Value::Struct(vec![(1, v)]);
        }
        let mut out = Vec::new();
        write_message(
            &mut out,
            Protocol::Binary,
            "x",
            MessageType::Call,
            1,
            &[(1, v)],
        );
        let e = scan(&out, Protocol::Binary, limits, 1);
        assert!(
            matches!(&e, Err(Error::Invalid(m)) if m.contains("nested")),
            "{e:?}"
        );
    }

    /// The reader and the scanner count a message's decoded size as [`decoded_size`] does: a
    /// limit of exactly that size lets it through, one byte less refuses it.
    #[test]
    fn the_decoded_size_is_counted_exactly() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut out = Vec::new();
            write_message(
                &mut out,
                protocol,
                "getRow",
                MessageType::Call,
                7,
                &sample(),
            );
            let (msg, _) = read_message(&out, protocol, Limits::default()).expect("a value");
            let size = decoded_size(&msg);
            assert!(size > out.len(), "{size}");
            let exact = Limits {
                max_decoded: size,
                ..Limits::default()
            };
            assert!(read_message(&out, protocol, exact).is_ok(), "{protocol}");
            assert_eq!(scan(&out, protocol, exact, 1), Ok(out.len()));
            let under = Limits {
                max_decoded: size - 1,
                ..Limits::default()
            };
            let e = read_message(&out, protocol, under).expect_err("an error");
            assert!(e.to_string().contains("decoded"), "{e}");
            let e = scan(&out, protocol, under, 1).expect_err("an error");
            assert!(e.to_string().contains("decoded"), "{e}");
        }
    }

    /// An unframed list of 8 Mi bools is refused by the scanner as soon as its header has
    /// arrived, before the elements are sent (and so before any memory is taken for them).
    #[test]
    fn the_scanner_refuses_a_huge_list_from_its_header() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let call = list_call(protocol, TType::Bool, &[1], 8 << 20);
            let header = &call[..call.len() - (8 << 20) - 1];
            let e = scan(header, protocol, Limits::default(), 1).expect_err("an error");
            assert!(e.to_string().contains("decoded"), "{protocol}: {e}");
            // Under the limit, the header alone is not enough.
            let call = list_call(protocol, TType::Bool, &[1], 1000);
            let header = &call[..call.len() - 1000 - 1];
            assert_eq!(
                scan(header, protocol, Limits::default(), 1),
                Err(Error::Incomplete)
            );
            assert_eq!(scan(&call, protocol, Limits::default(), 7), Ok(call.len()));
        }
    }
}
