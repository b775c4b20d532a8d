//! Compiles `proto/externalscaler.proto` into the messages, the server trait and the client
//! (`crate::proto`): protox parses the file in pure Rust (no `protoc` on the machine), and
//! tonic's prost generator writes the code from the descriptors it gives.

const PROTO: &str = "proto/externalscaler.proto";

fn main() {
    println!("cargo::rerun-if-changed={PROTO}");
    println!("cargo::rerun-if-changed=build.rs");
    if let Err(e) = run() {
        eprintln!("error: {PROTO}: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let descriptors = protox::compile([PROTO], ["proto"])?;
    tonic_prost_build::configure()
        // `scalerMetadata` is read in key order, as the rest of the scaler reads metadata.
        .btree_map(".")
        .compile_fds(descriptors)?;
    Ok(())
}
