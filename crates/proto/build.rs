//! Compiles the protobuf definitions with protox (pure Rust): no system `protoc` is needed.
//! `proto/cellar.proto` is Cellar's native protocol; `proto/hbase/*.proto` is Cellar's own
//! subset of the HBase 2.x wire format (package `hbase.pb`).

const HBASE_PROTOS: [&str; 15] = [
    "hbase/HBase.proto",
    "hbase/WAL.proto",
    "hbase/ClusterStatus.proto",
    "hbase/Cell.proto",
    "hbase/Comparator.proto",
    "hbase/Filter.proto",
    "hbase/MapReduce.proto",
    "hbase/ErrorHandling.proto",
    "hbase/RPC.proto",
    "hbase/Client.proto",
    "hbase/Registry.proto",
    "hbase/Master.proto",
    "hbase/Admin.proto",
    "hbase/ZooKeeper.proto",
    "hbase/AccessControl.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/cellar.proto");
    let descriptors = protox::compile(["proto/cellar.proto"], ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;

    // The HBase files import each other by bare file name, as HBase's own do.
    for file in HBASE_PROTOS {
        println!("cargo:rerun-if-changed=proto/{file}");
    }
    let files = HBASE_PROTOS.map(|f| f.trim_start_matches("hbase/"));
    let descriptors = protox::compile(files, ["proto/hbase"])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
