//! What a YCSB target implements (YCSB's `DB`), and where latencies go (YCSB's
//! `Measurements`).

use bytes::Bytes;

/// A record's fields: `field0`… and their values.
pub type Fields = Vec<(String, Bytes)>;

/// YCSB's `Status`; its name is what the output's `Return=` lines show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Ok,
    NotFound,
    Error(String),
    BadRequest(String),
}

impl Status {
    /// YCSB's name: `OK`, `NOT_FOUND`, `ERROR`, `BAD_REQUEST`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::NotFound => "NOT_FOUND",
            Status::Error(_) => "ERROR",
            Status::BadRequest(_) => "BAD_REQUEST",
        }
    }

    pub fn is_ok(&self) -> bool {
        *self == Status::Ok
    }
}

/// One target (a Cellar server over the native client, the embedded engine, ...). Called
/// from many client threads at once, one operation per call, as YCSB's `DB` is.
pub trait Db: Send + Sync {
    /// `fields`: `None` reads every field.
    fn read(&self, table: &str, key: &str, fields: Option<&[String]>) -> (Status, Fields);
    /// `record_count` records from `start_key` on, in key order.
    fn scan(
        &self,
        table: &str,
        start_key: &str,
        record_count: usize,
        fields: Option<&[String]>,
    ) -> (Status, Vec<Fields>);
    fn update(&self, table: &str, key: &str, values: &Fields) -> Status;
    fn insert(&self, table: &str, key: &str, values: &Fields) -> Status;
    fn delete(&self, table: &str, key: &str) -> Status;
}

/// Where latencies and return codes go, per operation name (`READ`, `UPDATE`, `INSERT`,
/// `SCAN`, `DELETE`, `READ-MODIFY-WRITE`), as YCSB's `Measurements`.
pub trait Measurements: Send + Sync {
    fn measure(&self, op: &str, latency_us: u64);
    fn report_status(&self, op: &str, status: &Status);
}
