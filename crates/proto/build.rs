//! Compiles `proto/cellar.proto` with protox (pure Rust): no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/cellar.proto");
    let descriptors = protox::compile(["proto/cellar.proto"], ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
