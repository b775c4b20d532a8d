//! Validates files as OpenMetrics and prints the verdicts: `cargo run --example validate -- FILE…`.
fn main() {
    for path in std::env::args().skip(1) {
        let text = std::fs::read(&path).unwrap_or_default();
        match inferscale_promtext::validate_openmetrics(&text) {
            Ok(exp) => println!(
                "{path}: ok ({} families, {} samples)",
                exp.family_count(),
                exp.sample_count()
            ),
            Err(e) => println!("{path}: {e}"),
        }
    }
}
