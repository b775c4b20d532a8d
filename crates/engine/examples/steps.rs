//! How fast the engine simulates (`bench/engine.sh` runs it): seeded Poisson loads on one
//! replica, below and above saturation, the engine advanced from arrival to arrival and then
//! drained. Prints, per load, the wall time, the steps simulated and the simulated seconds
//! per wall second, and a checksum of what the engine counted (equal checksums: the same
//! simulation).

use std::time::Instant;

use inferscale_engine::Rng;
use inferscale_engine::hardware::find_gpu;
use inferscale_engine::model::find_model;
use inferscale_engine::{Engine, EngineConfig, RequestSpec};

struct Load {
    name: &'static str,
    gpu: &'static str,
    model: &'static str,
    rate: f64,
    seconds: f64,
    prompt: (u32, u32),
    output: (u32, u32),
}

const LOADS: [Load; 3] = [
    Load {
        name: "L40S 8B, 40 req/s (below saturation)",
        gpu: "L40S",
        model: "Ministral-3-8B",
        rate: 40.0,
        seconds: 600.0,
        prompt: (20, 200),
        output: (50, 300),
    },
    Load {
        name: "L40S 8B, 120 req/s (2x saturation)",
        gpu: "L40S",
        model: "Ministral-3-8B",
        rate: 120.0,
        seconds: 300.0,
        prompt: (20, 200),
        output: (50, 300),
    },
    Load {
        name: "H100 8B, 60 req/s, long prompts",
        gpu: "H100",
        model: "Llama-3.1-8B",
        rate: 60.0,
        seconds: 300.0,
        prompt: (500, 3000),
        output: (100, 500),
    },
];

fn run(load: &Load) -> (f64, u64, u64) {
    let (Some(gpu), Some(model)) = (find_gpu(load.gpu), find_model(load.model)) else {
        panic!("{} or {} is not in the catalog", load.gpu, load.model);
    };
    let mut e = Engine::new(EngineConfig::new(gpu, model)).unwrap_or_else(|err| panic!("{err}"));
    let mut rng = Rng::new(7);
    let mut events = Vec::new();
    let pick =
        |rng: &mut Rng, (lo, hi): (u32, u32)| lo + (rng.next_u64() % u64::from(hi - lo + 1)) as u32;
    let start = Instant::now();
    let mut t = 0.0;
    while t < load.seconds {
        t += -rng.next_f64().max(1e-12).ln() / load.rate;
        e.advance(t, &mut events);
        events.clear();
        let spec = RequestSpec {
            prompt_tokens: pick(&mut rng, load.prompt),
            max_tokens: pick(&mut rng, load.output),
            ignore_eos: true,
        };
        e.submit(spec, t);
    }
    while let Some(next) = e.next_event_time() {
        e.advance(next, &mut events);
        events.clear();
    }
    let wall = start.elapsed().as_secs_f64();
    let s = e.stats();
    let checksum = s.generation_tokens ^ (s.steps << 20) ^ s.preemptions.wrapping_mul(31);
    (wall, s.steps, checksum)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    for load in &LOADS {
        for round in 1..=rounds {
            let (wall, steps, checksum) = run(load);
            println!(
                "{:<40} run {round}: {wall:>7.3} s  {steps:>8} steps  {:>8.0} simulated s per s  checksum {checksum:x}",
                load.name,
                load.seconds / wall
            );
        }
    }
}
