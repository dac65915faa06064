#!/bin/sh
# Interleaved A/B of GMM full covariances for a loaded machine
# (docs/performance.md, "Full covariances, session 8"): ROUNDS rounds of
# lse_bench on sets a and c, old build then new, by the process's CPU time;
# 1 thread with OPENBLAS_NUM_THREADS=1, 2 threads with OpenBLAS's default.
#
#   bench/full_ab.sh OLD_BUILD NEW_BUILD DATA [ROUNDS]
set -eu
old=${1:?usage: full_ab.sh OLD_BUILD NEW_BUILD DATA [ROUNDS]}
new=${2:?usage: full_ab.sh OLD_BUILD NEW_BUILD DATA [ROUNDS]}
data=${3:?usage: full_ab.sh OLD_BUILD NEW_BUILD DATA [ROUNDS]}
rounds=${4:-3}
export BENCH_CLOCK=cpu BENCH_REPS=${BENCH_REPS:-3}
for t in 1 2; do OPENBLAS_NUM_THREADS=$t "$new/bench/dgemm_peak" "$t"; done
r=1
while [ "$r" -le "$rounds" ]; do
    for c in a c; do
        for b in "$old" "$new"; do
            echo "round $r build $b"
            OPENBLAS_NUM_THREADS=1 "$b/bench/lse_bench" gmm "$data" "$c" full 1
            "$b/bench/lse_bench" gmm "$data" "$c" full 2
        done
    done
    r=$((r + 1))
done
for t in 1 2; do OPENBLAS_NUM_THREADS=$t "$new/bench/dgemm_peak" "$t"; done
