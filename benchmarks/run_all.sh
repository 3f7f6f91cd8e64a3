#!/usr/bin/env bash
# Every podium benchmark, both configurations, with short settings (about 8 minutes).
# The full settings and the figures are in BENCHMARKS.md. Postgres and Redis must be reachable
# on 127.0.0.1 (PODIUM_BENCH_POSTGRES / PODIUM_BENCH_REDIS override); each script creates
# its own database and key prefix and removes them, also when interrupted.
#
#   benchmarks/run_all.sh                 # the working tree's podium
#   QUIET=0.35 benchmarks/run_all.sh      # wait for a quiet machine before each run
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
QUIET=${QUIET:-0}

for cfg in embedded production; do
  echo "=== breakdown.py --config $cfg"
  "$PY" benchmarks/breakdown.py --config "$cfg" --n 500
  echo "=== accept.py --config $cfg"
  "$PY" benchmarks/accept.py --config "$cfg" --duration 10 --quiet "$QUIET"
  echo "=== reads.py --config $cfg"
  "$PY" benchmarks/reads.py --config "$cfg" --players 20000 --concurrency 16,64 --duration 3 \
    --quiet "$QUIET"
done
echo "=== record_paths.py (production)"
"$PY" benchmarks/record_paths.py --records 500 --repeat 2
