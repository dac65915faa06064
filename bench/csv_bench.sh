#!/bin/sh
# CSV reading speed on set b (docs/io.md "Speed"): writes set b (1e6 rows x 2
# columns, the numbers as Python's repr writes them: the shortest string that
# reads back exactly, 38 MB) as CSV once, then runs bench/csv_read on it.
#
#   bench/csv_bench.sh [BUILD_DIR] [DATA_DIR]     (default build-rel, BUILD/bench-data)
#
# REPS (default 5) runs; the RESULT line has wall and CPU-time MB/s.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-rel}
data=${2:-$build/bench-data}
ninja -C "$build" bench/csv_read bench/lse_bench_gen >/dev/null
if [ ! -f "$data/gmm_b.bin" ]; then
    mkdir -p "$data"
    "$build/bench/lse_bench_gen" "$data"
fi
csv="$data/gmm_b.csv"
if [ ! -f "$csv" ]; then
    /usr/bin/python3 - "$src/bench" "$data/gmm_b.bin" "$csv" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import benchio
x = benchio.read(sys.argv[2])
with open(sys.argv[3], "w") as f:
    f.write("x1,x2\n")
    for a, b in x:
        f.write(f"{float(a)!r},{float(b)!r}\n")
PY
fi
"$build/bench/csv_read" "$csv" "${REPS:-5}"
