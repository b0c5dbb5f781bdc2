//! (being written)
pub struct HbaseServer;
