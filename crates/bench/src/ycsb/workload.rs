//! YCSB's `CoreWorkload`: the record layout (key names, field names and values), the load
//! phase's insert sequence and the run phase's operation mix and key choice, configured by
//! YCSB's own property names and defaults.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

use super::db::{Db, Fields, Measurements, Status};
use super::generator::{
    AcknowledgedCounterGenerator, ConstantIntegerGenerator, CounterGenerator, DiscreteGenerator,
    ExponentialGenerator, HotspotIntegerGenerator, LastValue, ScrambledZipfianGenerator,
    SequentialGenerator, SkewedLatestGenerator, UniformLongGenerator, ZipfianGenerator,
};
use super::properties::Properties;

/// The property that seeds the client threads' rngs (Cellar's addition; YCSB always draws
/// from entropy). Thread `i` gets a seed derived from this and `i`.
pub const SEED_PROPERTY: &str = "cellar.seed";

/// How often the run phase may redraw a key that is not inserted yet before settling for
/// the newest inserted one (YCSB redraws without bound).
const MAX_KEY_DRAWS: usize = 100_000;

/// One run-phase operation, as YCSB's operation chooser names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// `fieldlengthdistribution`.
#[derive(Debug)]
enum FieldLength {
    Constant(ConstantIntegerGenerator),
    Uniform(UniformLongGenerator),
    Zipfian(ZipfianGenerator),
}

/// `requestdistribution`: how the run phase picks the record to operate on.
#[derive(Debug)]
enum KeyChooser {
    Uniform(UniformLongGenerator),
    Zipfian(ScrambledZipfianGenerator),
    Latest(SkewedLatestGenerator),
    Hotspot(HotspotIntegerGenerator),
    Sequential(SequentialGenerator),
    Exponential(ExponentialGenerator),
}

/// `scanlengthdistribution`.
#[derive(Debug)]
enum ScanLength {
    Uniform(UniformLongGenerator),
    Zipfian(ZipfianGenerator),
}

/// YCSB's core workload, shared by all client threads of one load or run.
#[derive(Debug)]
pub struct CoreWorkload {
    table: String,
    field_names: Vec<String>,
    field_length: FieldLength,
    read_all_fields: bool,
    read_all_fields_by_name: bool,
    write_all_fields: bool,
    record_count: u64,
    operation_count: u64,
    insert_start: u64,
    insert_count: u64,
    zero_padding: usize,
    ordered_inserts: bool,
    /// The load phase's keys: `insertstart`, `insertstart + 1`, ...
    key_sequence: CounterGenerator,
    operation_chooser: DiscreteGenerator<Operation>,
    key_chooser: KeyChooser,
    field_chooser: UniformLongGenerator,
    scan_length: ScanLength,
    /// The run phase's inserts: `recordcount`, `recordcount + 1`, ...; its acknowledged end
    /// bounds the keys the run phase may pick.
    transaction_insert_key_sequence: Arc<AcknowledgedCounterGenerator>,
    insertion_retry_limit: u64,
    insertion_retry_interval_s: u64,
    seed: Option<u64>,
}

/// One client thread's state: its rng.
#[derive(Debug)]
pub struct ThreadState {
    rng: SmallRng,
}

impl ThreadState {
    pub fn rng(&mut self) -> &mut SmallRng {
        &mut self.rng
    }
}

impl CoreWorkload {
    /// Reads every `CoreWorkload` property, with YCSB's defaults; a bad value is an error
    /// naming the property.
    pub fn new(p: &Properties) -> Result<CoreWorkload, String> {
        let table = p.get_str("table", "usertable");
        let field_count = p.get_u64("fieldcount", 10)?;
        if field_count == 0 {
            return Err("property fieldcount: must be at least 1".to_string());
        }
        let prefix = p.get_str("fieldnameprefix", "field");
        let field_names = (0..field_count).map(|i| format!("{prefix}{i}")).collect();
        let field_length = field_length_generator(p)?;

        // YCSB reads an absent or zero recordcount as Integer.MAX_VALUE.
        let record_count = match p.get_u64("recordcount", 0)? {
            0 => i32::MAX as u64,
            n => n,
        };
        let operation_count = p.get_u64("operationcount", 0)?;
        let insert_start = p.get_u64("insertstart", 0)?;
        let insert_count = p.get_u64("insertcount", record_count.saturating_sub(insert_start))?;
        if insert_start.saturating_add(insert_count) > record_count {
            return Err(format!(
                "properties insertstart ({insert_start}) + insertcount ({insert_count}) exceed \
                 recordcount ({record_count})"
            ));
        }
        if insert_count == 0 {
            return Err(format!(
                "property insertcount: no records to operate on (insertstart {insert_start}, \
                 recordcount {record_count})"
            ));
        }
        let zero_padding = usize::try_from(p.get_u64("zeropadding", 1)?)
            .map_err(|_| "property zeropadding: too large".to_string())?;
        let read_all_fields = p.get_bool("readallfields", true)?;
        let read_all_fields_by_name = p.get_bool("readallfieldsbyname", false)?;
        let write_all_fields = p.get_bool("writeallfields", false)?;
        if p.get_bool("dataintegrity", false)? {
            return Err("property dataintegrity: true is not supported by cellar bench".into());
        }
        let ordered_inserts = match p.get_str("insertorder", "hashed").as_str() {
            "hashed" => false,
            // YCSB treats every value other than "hashed" as ordered.
            _ => true,
        };

        let operation_chooser = operation_chooser(p)?;
        let transaction_insert_key_sequence =
            Arc::new(AcknowledgedCounterGenerator::new(record_count));
        let key_chooser = key_chooser(
            p,
            insert_start,
            insert_count,
            record_count,
            operation_count,
            &transaction_insert_key_sequence,
        )?;

        let min_scan = p.get_u64("minscanlength", 1)?;
        let max_scan = p.get_u64("maxscanlength", 1000)?;
        if max_scan < min_scan {
            return Err(format!(
                "property maxscanlength ({max_scan}) is below minscanlength ({min_scan})"
            ));
        }
        let scan_length = match p.get_str("scanlengthdistribution", "uniform").as_str() {
            "uniform" => ScanLength::Uniform(UniformLongGenerator::new(min_scan, max_scan)),
            "zipfian" => ScanLength::Zipfian(ZipfianGenerator::with_range(min_scan, max_scan)),
            other => {
                return Err(format!(
                    "property scanlengthdistribution: unknown distribution {other:?} \
                     (uniform or zipfian)"
                ))
            }
        };

        let seed = match p.get(SEED_PROPERTY) {
            None => None,
            Some(_) => Some(p.get_u64(SEED_PROPERTY, 0)?),
        };

        Ok(CoreWorkload {
            table,
            field_names,
            field_length,
            read_all_fields,
            read_all_fields_by_name,
            write_all_fields,
            record_count,
            operation_count,
            insert_start,
            insert_count,
            zero_padding,
            ordered_inserts,
            key_sequence: CounterGenerator::new(insert_start),
            operation_chooser,
            key_chooser,
            field_chooser: UniformLongGenerator::new(0, field_count - 1),
            scan_length,
            transaction_insert_key_sequence,
            insertion_retry_limit: p.get_u64("core_workload_insertion_retry_limit", 0)?,
            insertion_retry_interval_s: p.get_u64("core_workload_insertion_retry_interval", 3)?,
            seed,
        })
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// `recordcount` (Integer.MAX_VALUE when absent or 0, as YCSB).
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// `operationcount`.
    pub fn operation_count(&self) -> u64 {
        self.operation_count
    }

    /// `insertstart`: the first key number this client loads.
    pub fn insert_start(&self) -> u64 {
        self.insert_start
    }

    /// The number of records this client loads: `insertcount`, or `recordcount -
    /// insertstart`.
    pub fn insert_count(&self) -> u64 {
        self.insert_count
    }

    /// `field0`, `field1`, ... (with `fieldnameprefix`).
    pub fn field_names(&self) -> &[String] {
        &self.field_names
    }

    /// Client thread `thread_id`'s state; its rng is seeded from `cellar.seed` and the thread
    /// id when that property is set, from entropy otherwise.
    pub fn thread_state(&self, thread_id: usize, _thread_count: usize) -> ThreadState {
        let rng = match self.seed {
            Some(seed) => SmallRng::seed_from_u64(
                seed ^ (thread_id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            None => SmallRng::from_entropy(),
        };
        ThreadState { rng }
    }

    /// YCSB's `buildKeyName`: `user` followed by the key number (its [`fnvhash64`] unless
    /// `insertorder=ordered`), left-padded with zeros to `zeropadding` digits.
    ///
    /// [`fnvhash64`]: super::generator::fnvhash64
    pub fn build_key_name(&self, keynum: u64) -> String {
        build_key_name(keynum, self.zero_padding, self.ordered_inserts)
    }

    /// Load phase: inserts the next key of the shared insert sequence, retrying up to
    /// `core_workload_insertion_retry_limit` times, `core_workload_insertion_retry_interval`
    /// seconds (±20%) apart. False when the insert failed for good.
    pub fn do_insert(&self, db: &dyn Db, st: &mut ThreadState) -> bool {
        let keynum = self.key_sequence.next_value();
        let key = self.build_key_name(keynum);
        let values = self.build_values(&mut st.rng);
        let mut retries = 0;
        loop {
            let status = db.insert(&self.table, &key, &values);
            if status.is_ok() {
                return true;
            }
            retries += 1;
            if retries > self.insertion_retry_limit {
                eprintln!(
                    "Error inserting {key}, not retrying any more. number of attempts: \
                     {retries}. Insertion Retry Limit: {}",
                    self.insertion_retry_limit
                );
                return false;
            }
            eprintln!("Retrying insertion of {key}, retry count: {retries}");
            let factor = 0.8 + 0.4 * st.rng.gen::<f64>();
            std::thread::sleep(Duration::from_secs_f64(
                self.insertion_retry_interval_s as f64 * factor,
            ));
        }
    }

    /// Run phase: one operation chosen by the proportions. Per-operation latencies are the
    /// caller's (YCSB's `DBWrapper`); read-modify-write measures itself as
    /// `READ-MODIFY-WRITE`. False only when no operation can be done (the thread stops).
    pub fn do_transaction(
        &self,
        db: &dyn Db,
        st: &mut ThreadState,
        meas: &dyn Measurements,
    ) -> bool {
        let Some(&op) = self.operation_chooser.next_value(&mut st.rng) else {
            return false;
        };
        match op {
            Operation::Read => {
                self.do_transaction_read(db, st);
            }
            Operation::Update => {
                self.do_transaction_update(db, st);
            }
            Operation::Insert => return self.do_transaction_insert(db, st),
            Operation::Scan => {
                self.do_transaction_scan(db, st);
            }
            Operation::ReadModifyWrite => {
                self.do_transaction_read_modify_write(db, st, meas);
            }
        }
        true
    }

    fn do_transaction_read(&self, db: &dyn Db, st: &mut ThreadState) -> Status {
        let key = self.build_key_name(self.next_keynum(&mut st.rng));
        let fields = self.read_fields(&mut st.rng, self.read_all_fields_by_name);
        db.read(&self.table, &key, fields.as_deref()).0
    }

    fn do_transaction_update(&self, db: &dyn Db, st: &mut ThreadState) -> Status {
        let key = self.build_key_name(self.next_keynum(&mut st.rng));
        let values = self.write_values(&mut st.rng);
        db.update(&self.table, &key, &values)
    }

    /// Inserts the next key of the run's insert sequence and acknowledges it, success or
    /// not, so readers may pick it. False when the acknowledgement window overflowed.
    fn do_transaction_insert(&self, db: &dyn Db, st: &mut ThreadState) -> bool {
        let keynum = self.transaction_insert_key_sequence.next_value();
        let key = self.build_key_name(keynum);
        let values = self.build_values(&mut st.rng);
        db.insert(&self.table, &key, &values);
        match self.transaction_insert_key_sequence.acknowledge(keynum) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("{e}");
                false
            }
        }
    }

    fn do_transaction_scan(&self, db: &dyn Db, st: &mut ThreadState) -> Status {
        let start = self.build_key_name(self.next_keynum(&mut st.rng));
        let len = match &self.scan_length {
            ScanLength::Uniform(g) => g.next_value(&mut st.rng),
            ScanLength::Zipfian(g) => g.next_value(&mut st.rng),
        };
        let fields = self.read_fields(&mut st.rng, false);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        db.scan(&self.table, &start, len, fields.as_deref()).0
    }

    fn do_transaction_read_modify_write(
        &self,
        db: &dyn Db,
        st: &mut ThreadState,
        meas: &dyn Measurements,
    ) -> Status {
        let key = self.build_key_name(self.next_keynum(&mut st.rng));
        let fields = self.read_fields(&mut st.rng, false);
        let values = self.write_values(&mut st.rng);
        let started = Instant::now();
        let mut status = db.read(&self.table, &key, fields.as_deref()).0;
        if status.is_ok() {
            status = db.update(&self.table, &key, &values);
        }
        let latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        meas.measure("READ-MODIFY-WRITE", latency_us);
        meas.report_status("READ-MODIFY-WRITE", &status);
        status
    }

    /// YCSB's `nextKeynum`: a key number from the request distribution that has been
    /// inserted (at most the acknowledged end of the run's insert sequence).
    fn next_keynum(&self, rng: &mut SmallRng) -> u64 {
        let last = self.transaction_insert_key_sequence.last_value();
        for _ in 0..MAX_KEY_DRAWS {
            let keynum = match &self.key_chooser {
                KeyChooser::Exponential(g) => {
                    // Back from the newest key by an exponential distance.
                    let back = g.next_value(rng) as i64;
                    match last.checked_sub(back) {
                        Some(k) if k >= 0 => return k as u64,
                        _ => continue,
                    }
                }
                KeyChooser::Uniform(g) => g.next_value(rng),
                KeyChooser::Zipfian(g) => g.next_value(rng),
                KeyChooser::Latest(g) => g.next_value(rng),
                KeyChooser::Hotspot(g) => g.next_value(rng),
                KeyChooser::Sequential(g) => g.next_value(),
            };
            if keynum as i64 <= last {
                return keynum;
            }
        }
        last.max(0) as u64
    }

    /// The fields a read or scan asks for: one random field unless `readallfields`; all by
    /// name when `by_name` (YCSB's `readallfieldsbyname`, reads only); otherwise `None`.
    fn read_fields(&self, rng: &mut SmallRng, by_name: bool) -> Option<Vec<String>> {
        if !self.read_all_fields {
            Some(vec![self.random_field_name(rng).to_string()])
        } else if by_name {
            Some(self.field_names.clone())
        } else {
            None
        }
    }

    /// An update's values: every field with `writeallfields`, else one random field.
    fn write_values(&self, rng: &mut SmallRng) -> Fields {
        if self.write_all_fields {
            self.build_values(rng)
        } else {
            let name = self.random_field_name(rng).to_string();
            let value = self.random_value(rng);
            vec![(name, value)]
        }
    }

    fn random_field_name(&self, rng: &mut SmallRng) -> &str {
        let i = self.field_chooser.next_value(rng) as usize;
        self.field_names.get(i).map(String::as_str).unwrap_or("")
    }

    /// Values for every field, each of a length drawn from `fieldlengthdistribution`.
    fn build_values(&self, rng: &mut SmallRng) -> Fields {
        self.field_names
            .iter()
            .map(|name| (name.clone(), self.random_value(rng)))
            .collect()
    }

    /// Random printable bytes (`' '` to `'_'`, as YCSB's `RandomByteIterator`).
    fn random_value(&self, rng: &mut SmallRng) -> Bytes {
        let len = match &self.field_length {
            FieldLength::Constant(g) => g.next_value(),
            FieldLength::Uniform(g) => g.next_value(rng),
            FieldLength::Zipfian(g) => g.next_value(rng),
        } as usize;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let bits = rng.next_u64();
            let take = (len - out.len()).min(8);
            out.extend((0..take).map(|i| b' ' + ((bits >> (i * 8)) as u8 & 63)));
        }
        Bytes::from(out)
    }
}

/// YCSB's `CoreWorkload.buildKeyName`.
pub fn build_key_name(keynum: u64, zero_padding: usize, ordered_inserts: bool) -> String {
    let n = if ordered_inserts {
        keynum
    } else {
        super::generator::fnvhash64(keynum)
    };
    format!("user{n:0>zero_padding$}")
}

/// `fieldlengthdistribution` over `minfieldlength ..= fieldlength`.
fn field_length_generator(p: &Properties) -> Result<FieldLength, String> {
    let max = p.get_u64("fieldlength", 100)?;
    let min = p.get_u64("minfieldlength", 1)?;
    let dist = p.get_str("fieldlengthdistribution", "constant");
    if dist != "constant" && min > max {
        return Err(format!(
            "property minfieldlength ({min}) is above fieldlength ({max})"
        ));
    }
    match dist.as_str() {
        "constant" => Ok(FieldLength::Constant(ConstantIntegerGenerator::new(max))),
        "uniform" => Ok(FieldLength::Uniform(UniformLongGenerator::new(min, max))),
        "zipfian" => Ok(FieldLength::Zipfian(ZipfianGenerator::with_range(min, max))),
        "histogram" => Err(
            "property fieldlengthdistribution: histogram is not supported by cellar bench".into(),
        ),
        other => Err(format!(
            "property fieldlengthdistribution: unknown distribution {other:?} \
             (constant, uniform or zipfian)"
        )),
    }
}

/// YCSB's `createOperationGenerator`: the operations with a positive proportion, in YCSB's
/// order.
fn operation_chooser(p: &Properties) -> Result<DiscreteGenerator<Operation>, String> {
    let mut chooser = DiscreteGenerator::new();
    for (property, default, op) in [
        ("readproportion", 0.95, Operation::Read),
        ("updateproportion", 0.05, Operation::Update),
        ("insertproportion", 0.0, Operation::Insert),
        ("scanproportion", 0.0, Operation::Scan),
        ("readmodifywriteproportion", 0.0, Operation::ReadModifyWrite),
    ] {
        let weight = p.get_f64(property, default)?;
        if weight < 0.0 {
            return Err(format!("property {property}: {weight} is negative"));
        }
        if weight > 0.0 {
            chooser.add_value(weight, op);
        }
    }
    if chooser.is_empty() {
        return Err(
            "properties readproportion, updateproportion, insertproportion, \
                    scanproportion and readmodifywriteproportion are all 0"
                .to_string(),
        );
    }
    Ok(chooser)
}

/// `requestdistribution`, over the records `insertstart .. insertstart + insertcount`.
fn key_chooser(
    p: &Properties,
    insert_start: u64,
    insert_count: u64,
    record_count: u64,
    operation_count: u64,
    inserts: &Arc<AcknowledgedCounterGenerator>,
) -> Result<KeyChooser, String> {
    let last = insert_start + insert_count - 1;
    let fraction = |property: &str, default: f64| -> Result<f64, String> {
        let v = p.get_f64(property, default)?;
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(format!("property {property}: {v} is outside 0..1"))
        }
    };
    Ok(match p.get_str("requestdistribution", "uniform").as_str() {
        "uniform" => KeyChooser::Uniform(UniformLongGenerator::new(insert_start, last)),
        "exponential" => {
            let percentile = p.get_f64("exponential.percentile", 95.0)?;
            if !(percentile > 0.0 && percentile < 100.0) {
                return Err(format!(
                    "property exponential.percentile: {percentile} is outside (0, 100)"
                ));
            }
            let frac = p.get_f64("exponential.frac", ExponentialGenerator::FRAC_DEFAULT)?;
            if frac <= 0.0 {
                return Err(format!("property exponential.frac: {frac} is not positive"));
            }
            KeyChooser::Exponential(ExponentialGenerator::new(
                percentile,
                record_count as f64 * frac,
            ))
        }
        "sequential" => KeyChooser::Sequential(SequentialGenerator::new(insert_start, last)),
        "zipfian" => {
            // As YCSB: size the key space for the inserts the run is expected to make
            // (twice, as a fudge factor) so that new keys do not reshuffle popularity;
            // draws past the inserted keys are redrawn.
            let insert_proportion = p.get_f64("insertproportion", 0.0)?;
            let expected_new_keys = (operation_count as f64 * insert_proportion * 2.0) as u64;
            let max = insert_start + insert_count + expected_new_keys;
            let constant = p.get_f64("zipfianconstant", ZipfianGenerator::ZIPFIAN_CONSTANT)?;
            if !(constant > 0.0 && constant < 1.0) {
                return Err(format!(
                    "property zipfianconstant: {constant} is outside (0, 1)"
                ));
            }
            if constant == ZipfianGenerator::ZIPFIAN_CONSTANT {
                KeyChooser::Zipfian(ScrambledZipfianGenerator::new(insert_start, max))
            } else {
                KeyChooser::Zipfian(ScrambledZipfianGenerator::with_constant(
                    insert_start,
                    max,
                    constant,
                ))
            }
        }
        "latest" => {
            let basis: Arc<dyn LastValue> = inserts.clone();
            KeyChooser::Latest(SkewedLatestGenerator::new(basis))
        }
        "hotspot" => KeyChooser::Hotspot(HotspotIntegerGenerator::new(
            insert_start,
            last,
            fraction("hotspotdatafraction", 0.2)?,
            fraction("hotspotopnfraction", 0.8)?,
        )),
        other => {
            return Err(format!(
                "property requestdistribution: unknown distribution {other:?} (uniform, \
                 zipfian, latest, hotspot, sequential or exponential)"
            ))
        }
    })
}

#[cfg(test)]
mod tests;
