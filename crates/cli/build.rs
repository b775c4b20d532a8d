//! Tells the binary how it was optimised, so that `inferscale run` can warn when an
//! unoptimised build is asked to hold a simulator's speed-up it cannot (`cfg!(debug_assertions)`
//! would not do: the test profile is optimised but keeps debug assertions).

fn main() {
    let level = std::env::var("OPT_LEVEL").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=INFERSCALE_OPT_LEVEL={level}");
    println!("cargo:rerun-if-env-changed=OPT_LEVEL");
}
