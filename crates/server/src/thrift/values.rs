//! Reading call arguments and building `Hbase.thrift`'s structs. Field ids are the IDL's
//! (`docs/thrift.md` lists them).

use super::protocol::{TType, Value};
use bytes::Bytes;

/// Why a call failed, as `Hbase.thrift` declares it.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// `IOError` (every call declares it).
    Io(String),
    /// `IllegalArgument` (where the call declares it; else sent as `IOError`).
    IllegalArgument(String),
    /// `AlreadyExists` (createTable).
    AlreadyExists(String),
    /// Thrift's own `TApplicationException`: `kind` is its type (1 unknown method, 7
    /// protocol error).
    Application { kind: i32, message: String },
}

impl Fault {
    pub fn io(m: impl Into<String>) -> Fault {
        Fault::Io(m.into())
    }

    pub fn illegal(m: impl Into<String>) -> Fault {
        Fault::IllegalArgument(m.into())
    }
}

pub type Outcome<T> = Result<T, Fault>;

/// A struct's fields (a call's arguments are one).
pub struct Fields<'a>(pub &'a [(i16, Value)]);

impl<'a> Fields<'a> {
    pub fn get(&self, id: i16) -> Option<&'a Value> {
        self.0.iter().find(|(i, _)| *i == id).map(|(_, v)| v)
    }

    fn wrong(name: &str, want: &str, got: &Value) -> Fault {
        Fault::illegal(format!(
            "argument {name} must be {want}, not {:?}",
            got.ttype()
        ))
    }

    /// A binary (or string) argument; missing is an error.
    pub fn bytes(&self, id: i16, name: &str) -> Outcome<Bytes> {
        self.opt_bytes(id, name)?
            .ok_or_else(|| Fault::illegal(format!("argument {name} is missing")))
    }

    pub fn opt_bytes(&self, id: i16, name: &str) -> Outcome<Option<Bytes>> {
        match self.get(id) {
            None => Ok(None),
            Some(Value::Binary(b)) => Ok(Some(Bytes::copy_from_slice(b))),
            Some(v) => Err(Self::wrong(name, "a string", v)),
        }
    }

    /// A string argument as text.
    pub fn text(&self, id: i16, name: &str) -> Outcome<String> {
        let b = self.bytes(id, name)?;
        String::from_utf8(b.to_vec()).map_err(|_| Fault::illegal(format!("{name} is not UTF-8")))
    }

    pub fn opt_i64(&self, id: i16, name: &str) -> Outcome<Option<i64>> {
        match self.get(id) {
            None => Ok(None),
            Some(Value::I64(v)) => Ok(Some(*v)),
            Some(Value::I32(v)) => Ok(Some(i64::from(*v))),
            Some(v) => Err(Self::wrong(name, "an i64", v)),
        }
    }

    pub fn i64(&self, id: i16, name: &str) -> Outcome<i64> {
        self.opt_i64(id, name)?
            .ok_or_else(|| Fault::illegal(format!("argument {name} is missing")))
    }

    pub fn opt_i32(&self, id: i16, name: &str) -> Outcome<Option<i32>> {
        match self.get(id) {
            None => Ok(None),
            Some(Value::I32(v)) => Ok(Some(*v)),
            Some(Value::I16(v)) => Ok(Some(i32::from(*v))),
            Some(Value::Byte(v)) => Ok(Some(i32::from(*v))),
            Some(v) => Err(Self::wrong(name, "an i32", v)),
        }
    }

    pub fn opt_bool(&self, id: i16, name: &str) -> Outcome<Option<bool>> {
        match self.get(id) {
            None => Ok(None),
            Some(Value::Bool(v)) => Ok(Some(*v)),
            Some(v) => Err(Self::wrong(name, "a bool", v)),
        }
    }

    pub fn opt_text(&self, id: i16, name: &str) -> Outcome<Option<String>> {
        match self.opt_bytes(id, name)? {
            None => Ok(None),
            Some(b) => String::from_utf8(b.to_vec())
                .map(Some)
                .map_err(|_| Fault::illegal(format!("{name} is not UTF-8"))),
        }
    }

    /// A list of strings; missing is empty.
    pub fn bytes_list(&self, id: i16, name: &str) -> Outcome<Vec<Bytes>> {
        match self.get(id) {
            None => Ok(Vec::new()),
            Some(Value::List(_, items)) => items
                .iter()
                .map(|v| match v {
                    Value::Binary(b) => Ok(Bytes::copy_from_slice(b)),
                    other => Err(Self::wrong(name, "a list of strings", other)),
                })
                .collect(),
            Some(v) => Err(Self::wrong(name, "a list", v)),
        }
    }

    /// A struct argument.
    pub fn strukt(&self, id: i16, name: &str) -> Outcome<Fields<'a>> {
        match self.get(id) {
            Some(Value::Struct(f)) => Ok(Fields(f)),
            None => Err(Fault::illegal(format!("argument {name} is missing"))),
            Some(v) => Err(Self::wrong(name, "a struct", v)),
        }
    }

    pub fn opt_strukt(&self, id: i16, name: &str) -> Outcome<Option<Fields<'a>>> {
        match self.get(id) {
            None => Ok(None),
            _ => self.strukt(id, name).map(Some),
        }
    }

    /// A list of structs; missing is empty.
    pub fn struct_list(&self, id: i16, name: &str) -> Outcome<Vec<Fields<'a>>> {
        match self.get(id) {
            None => Ok(Vec::new()),
            Some(Value::List(_, items)) => items
                .iter()
                .map(|v| match v {
                    Value::Struct(f) => Ok(Fields(f)),
                    other => Err(Self::wrong(name, "a list of structs", other)),
                })
                .collect(),
            Some(v) => Err(Self::wrong(name, "a list", v)),
        }
    }

    /// A map of strings to strings (the `attributes` every data call takes).
    pub fn string_map(&self, id: i16, name: &str) -> Outcome<Vec<(Bytes, Bytes)>> {
        match self.get(id) {
            None => Ok(Vec::new()),
            Some(Value::Map(_, _, items)) => items
                .iter()
                .map(|(k, v)| match (k, v) {
                    (Value::Binary(k), Value::Binary(v)) => {
                        Ok((Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)))
                    }
                    _ => Err(Fault::illegal(format!(
                        "{name} must map strings to strings"
                    ))),
                })
                .collect(),
            Some(v) => Err(Self::wrong(name, "a map", v)),
        }
    }
}

/// `TCell { 1: value, 2: timestamp }`.
pub fn tcell(value: &[u8], timestamp: u64) -> Value {
    Value::Struct(vec![
        (1, Value::Binary(value.to_vec())),
        (2, Value::I64(timestamp as i64)),
    ])
}

/// `family:qualifier`, the column name Thrift1 uses everywhere.
pub fn column_name(family: &[u8], qualifier: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(family.len() + 1 + qualifier.len());
    name.extend_from_slice(family);
    name.push(b':');
    name.extend_from_slice(qualifier);
    name
}

/// `TRowResult { 1: row, 2: columns map or 3: sortedColumns list }` of the cells given
/// (newest version of each column first, as the server returns them; the map keeps the
/// newest).
pub fn row_result(row: &[u8], cells: &[cellar_model::Cell], sorted: bool) -> Value {
    let mut fields = vec![(1, Value::Binary(row.to_vec()))];
    let mut columns: Vec<(Vec<u8>, Value)> = Vec::with_capacity(cells.len());
    for c in cells {
        let name = column_name(&c.family, &c.qualifier);
        if columns.last().is_some_and(|(n, _)| *n == name) {
            continue; // an older version of the same column
        }
        columns.push((name, tcell(&c.value, c.timestamp)));
    }
    if sorted {
        let list = columns
            .into_iter()
            .map(|(name, cell)| Value::Struct(vec![(1, Value::Binary(name)), (2, cell)]))
            .collect();
        fields.push((3, Value::List(TType::Struct, list)));
    } else {
        let map = columns
            .into_iter()
            .map(|(name, cell)| (Value::Binary(name), cell))
            .collect();
        fields.push((2, Value::Map(TType::Binary, TType::Struct, map)));
    }
    Value::Struct(fields)
}

/// A column argument as HBase 2 parses it: `family:qualifier` (split at the first colon;
/// `family:` is the column with the empty qualifier), or `family` alone for the whole family.
pub fn split_column(col: &[u8]) -> (Bytes, Option<Bytes>) {
    let mut parts = col.splitn(2, |&b| b == b':');
    let family = parts.next().unwrap_or_default();
    (
        Bytes::copy_from_slice(family),
        parts.next().map(Bytes::copy_from_slice),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_split_as_hbase_names_them() {
        assert_eq!(
            split_column(b"cf:q"),
            (Bytes::from("cf"), Some(Bytes::from("q")))
        );
        assert_eq!(
            split_column(b"cf:a:b"),
            (Bytes::from("cf"), Some(Bytes::from("a:b")))
        );
        assert_eq!(
            split_column(b"cf:"),
            (Bytes::from("cf"), Some(Bytes::new()))
        );
        assert_eq!(split_column(b"cf"), (Bytes::from("cf"), None));
    }

    #[test]
    fn arguments_of_the_wrong_type_are_named() {
        let f = [(1, Value::I32(3)), (2, Value::Binary(b"t".to_vec()))];
        let args = Fields(&f);
        assert_eq!(
            args.bytes(2, "tableName").expect("a value"),
            Bytes::from("t")
        );
        let e = args.bytes(1, "tableName").expect_err("an error");
        assert!(
            matches!(&e, Fault::IllegalArgument(m) if m.contains("tableName must be a string")),
            "{e:?}"
        );
        let e = args.bytes(3, "row").expect_err("an error");
        assert!(
            matches!(&e, Fault::IllegalArgument(m) if m.contains("row is missing")),
            "{e:?}"
        );
        assert!(args.bytes_list(9, "columns").expect("a value").is_empty());
    }
}
