#!/usr/bin/env bash
# How fast the engine simulates, one build against another, side by side.
#
# Usage: bench/engine.sh [ROUNDS] [OLD_REV]
#   Builds crates/engine/examples/steps.rs in release at the working tree and, with OLD_REV,
#   at that revision's engine (its src/ only; the example is the working tree's), then runs
#   them alternately: old, new, old, new, ... ROUNDS times each (default 3). Equal checksums
#   mean both builds simulated the same thing.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
old=${2:-}
out=target/bench/engine
mkdir -p "$out"
cargo build --release -q -p inferscale-engine --example steps
cp target/release/examples/steps "$out/steps-new"
if [[ -n "$old" ]]; then
    tmp=$(mktemp -d)
    trap 'git worktree remove --force "$tmp" >/dev/null 2>&1 || true' EXIT
    git worktree add -q --detach "$tmp" "$old"
    mkdir -p "$tmp/crates/engine/examples"
    cp crates/engine/examples/steps.rs "$tmp/crates/engine/examples/"
    (cd "$tmp" && CARGO_TARGET_DIR="$PWD/../$(basename "$tmp")-target" cargo build --release -q -p inferscale-engine --example steps)
    cp "$tmp/../$(basename "$tmp")-target/release/examples/steps" "$out/steps-old"
    rm -rf "$tmp/../$(basename "$tmp")-target"
fi
for i in $(seq 1 "$rounds"); do
    if [[ -n "$old" ]]; then
        echo "== old ($old), round $i"
        taskset -c 1 "$out/steps-old" 1
    fi
    echo "== new (working tree), round $i"
    taskset -c 1 "$out/steps-new" 1
done
