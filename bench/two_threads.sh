#!/bin/sh
# Where a 2-thread GMM EM iteration goes (docs/performance.md, "Two
# threads, session 11"): each benchmark set and covariance fitted on 1
# thread and, under bench/gomp_profile.c, on 2 threads with ITERS1 and
# ITERS2 iterations; the difference of the two 2-thread runs cancels graph
# building, initialization and the final evaluation. Per EM iteration:
#   ms1, ms2   lse_bench's time per iteration on 1 and 2 threads
#   regions    parallel regions started
#   region     the master's wall time inside them
#   work0/1    each thread's time in region bodies outside loop barriers
#   bar        both threads' time in the barrier closing the chunk loop
#              (the chunks' imbalance), per cent of 2 x region
#   serial     ms2 - region: the iteration outside any region
#   pred       serial + the larger of work0 and work1: the 2-thread time
#              the per-thread work predicts
#   even       serial + the mean of work0 and work1: the same with the
#              chunks' imbalance gone
#   cpu2/cpu1  both threads' CPU time in region bodies per iteration over
#              ms1 - serial (above 1: the same work costs more CPU on two
#              cores; approximate, the 1-thread serial part is taken equal)
#
#   bench/two_threads.sh [BUILD_DIR [DATA_DIR]]
#
# BUILD_DIR (default build-rel, --buildtype=release), DATA_DIR (default
# BUILD_DIR/bench-data, made by lse_bench_gen). Environment: CASES (default
# "a:diag:50:150 c:diag:50:150 a:full:20:60 c:full:10:30", set:cov:ITERS1:
# ITERS2), BENCH_REPS (default 1).
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-rel}
data=${2:-$build/bench-data}
cases=${CASES:-"a:diag:50:150 c:diag:50:150 a:full:20:60 c:full:10:30"}
export BENCH_REPS="${BENCH_REPS:-1}"
unset OPENBLAS_CORETYPE || true

ninja -C "$build" bench/lse_bench_gen bench/lse_bench \
    bench/libgomp_profile.so >/dev/null
if [ ! -f "$data/gmm_c_w.bin" ]; then
    mkdir -p "$data"
    "$build/bench/lse_bench_gen" "$data"
fi
shim=$(cd "$build" && pwd)/bench/libgomp_profile.so
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

echo "start: $(uptime)"
echo "| case | ms1 | ms2 | x | regions | region | work0 | work1 | bar % | serial | pred | even | cpu2/cpu1 |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for c in $cases; do
    IFS=: read -r tag cov i1 i2 <<EOF
$c
EOF
    one=$(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 LSE_NUM_THREADS=1 \
        "$build/bench/lse_bench" gmm "$data" "$tag" "$cov" 1 "$i2")
    for it in "$i1" "$i2"; do
        echo "run $it" >>"$tmp"
        OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 LSE_NUM_THREADS=2 \
            LD_PRELOAD="$shim" \
            "$build/bench/lse_bench" gmm "$data" "$tag" "$cov" 2 "$it" \
            >>"$tmp" 2>&1
    done
    awk -v one="$one" -v n1="$i1" -v n2="$i2" -v name="$tag $cov" '
    function val(line, key,   s) {
        if (!match(line, key "=[^ ]*")) return 0
        s = substr(line, RSTART + length(key) + 1, RLENGTH - length(key) - 1)
        return s + 0
    }
    /^run / { r++ }
    / regions, region_ms=/ { reg[r] = val($0, "region_ms"); nreg[r] = $2 }
    /gomp_profile: thread [01] / {
        t = $3
        w[r, t] = val($0, "work_ms"); b[r, t] = val($0, "bar_ms")
        cpu[r] += val($0, "cpu_ms")
    }
    /^RESULT/ { ms2 = val($0, "ms_per_iter") }
    END {
        d = n2 - n1
        ms1 = val(one, "ms_per_iter")
        region = (reg[2] - reg[1]) / d
        w0 = (w[2, 0] - w[1, 0]) / d; w1 = (w[2, 1] - w[1, 1]) / d
        b0 = (b[2, 0] - b[1, 0]) / d; b1 = (b[2, 1] - b[1, 1]) / d
        serial = ms2 - region
        pred = serial + (w0 > w1 ? w0 : w1)
        c2 = (cpu[2] - cpu[1]) / d
        printf "| %s | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f | %.3f |\n",
            name, ms1, ms2, ms1 / ms2, (nreg[2] - nreg[1]) / d, region, w0,
            w1, 100 * (b0 + b1) / (2 * region), serial, pred,
            serial + (w0 + w1) / 2,
            c2 / (ms1 - serial)
    }' "$tmp"
    : >"$tmp"
done
echo "end: $(uptime)"
