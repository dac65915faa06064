#!/bin/sh
# Performance round two (docs/performance.md, "Round two"): in one run, the
# machine's limits (dgemm GFLOP/s, triad bandwidth, the library's vectorized
# exp rate; 1 and 2 threads) and lsegraph's GMM EM time per iteration on
# the benchmark sets against them:
#   roofline (full)      N K (2 d^2 + 5 d) flops at the dgemm rate
#   floor (diag, b full) one pass over the data (N d doubles) at the triad
#                        bandwidth plus N K exponentials at the exp rate
# VLFeat's diagonal EM beside each set when bench/vlfeat_gmm was built,
# then the same fits with OpenBLAS forced onto its SSE3 fallback
# (OPENBLAS_CORETYPE=Prescott; the library switches it back, lib/threads.c)
# and, given OLD_BUILD_DIR, an interleaved A/B of the redesign's open case
# (issue 12: a diag, c full) against that older build.
#
#   bench/round2.sh [BUILD_DIR [DATA_DIR [OLD_BUILD_DIR]]]
#
# BUILD_DIR (default build-perf) configured with --buildtype=release; data
# sets generated once into DATA_DIR (default BUILD_DIR/bench-data).
# OPENBLAS_CORETYPE is left to OpenBLAS (no knob). Environment: THREADS
# (default "1 2"), BENCH_REPS (fits per median, default 5), AB_REPS
# (A/B rounds, default 5), ROUNDS (default 3: the machine-limit, lsegraph
# and VLFeat runs are repeated in this many interleaved rounds, and each
# figure is the median over the rounds, so that a slow minute moves the
# peers alike and one lucky run decides nothing), GOMP_PROFILE=1 (the lsegraph fits on more than
# one thread run under bench/gomp_profile.c, which prints each thread's
# work and waits in the parallel regions to stderr).
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-perf}
data=${2:-$build/bench-data}
old=${3:-}
threads=${THREADS:-"1 2"}
abreps=${AB_REPS:-5}
rounds=${ROUNDS:-3}
unset OPENBLAS_CORETYPE || true

ninja -C "$build" bench/lse_bench_gen bench/lse_bench bench/dgemm_peak \
    bench/roofline >/dev/null
profile=
if [ "${GOMP_PROFILE:-0}" = 1 ]; then
    ninja -C "$build" bench/libgomp_profile.so >/dev/null
    profile=$(cd "$build" && pwd)/bench/libgomp_profile.so
fi
if [ ! -f "$data/gmm_c_w.bin" ]; then
    mkdir -p "$data"
    "$build/bench/lse_bench_gen" "$data"
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs;" \
     "OpenBLAS core: $(OPENBLAS_VERBOSE=2 "$build/bench/dgemm_peak" 1 8 2>&1 |
         sed -n 's/^Core: *//p' | tail -n 1)"
echo "start: $(uptime)"
for round in $(seq "$rounds"); do
for t in $threads; do
    export OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" LSE_NUM_THREADS="$t"
    "$build/bench/dgemm_peak" "$t" | tee -a "$results"
    "$build/bench/roofline" "$t" | tee -a "$results"
    for tag in a b c; do
        for cov in full diag; do
            pre=
            [ "$t" -gt 1 ] && pre=$profile
            LD_PRELOAD=$pre "$build/bench/lse_bench" gmm "$data" "$tag" \
                "$cov" "$t" | tee -a "$results"
        done
        # the diagonal peer in the same minutes (goal 2: at least 5x), when
        # VLFeat was found at configure time
        if [ -x "$build/bench/vlfeat_gmm" ]; then
            "$build/bench/vlfeat_gmm" "$data" "$tag" "$t" | tee -a "$results"
        fi
    done
done
echo "round $round of $rounds done: $(uptime)"
done
# OpenBLAS's fallback forced: the library must still reach the same speed
# (and the same log-likelihoods)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 LSE_NUM_THREADS=1
for c in "a full" "c full"; do
    # shellcheck disable=SC2086
    OPENBLAS_CORETYPE=Prescott "$build/bench/lse_bench" gmm "$data" $c 1 |
        sed 's/^RESULT /RESULT prescott=1 /' | tee -a "$results"
done
if [ -n "$old" ]; then
    for rep in $(seq "$abreps"); do
        for c in "a diag" "c full"; do
            for b in "$old" "$build"; do
                # shellcheck disable=SC2086
                "$b/bench/lse_bench" gmm "$data" $c 1 |
                    sed "s|^RESULT |RESULT ab=$([ "$b" = "$old" ] && echo old || echo new) |" |
                    tee -a "$results"
            done
        done
    done
fi
echo "end: $(uptime)"
echo
awk '
function med(list,   v, m, i, j, x) {
    m = split(list, v, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
        if (v[j] + 0 < v[i] + 0) { x = v[i]; v[i] = v[j]; v[j] = x }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
function val(line, key,   m) {
    if (match(line, " " key "=[^ ]*")) {
        m = substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
        return m
    }
    return ""
}
/tool=dgemm/ { dgl[val($0, "threads")] = dgl[val($0, "threads")] " " val($0, "gflops") }
/tool=roofline/ { trl[val($0, "threads")] = trl[val($0, "threads")] " " val($0, "triad_gbs");
                  exl[val($0, "threads")] = exl[val($0, "threads")] " " val($0, "exp_gps") }
/tool=lsegraph/ && !/prescott=/ && !/ab=/ {
    k = val($0, "case") " " val($0, "threads")
    if (!(k in msl)) { n++; line[n] = $0 }
    msl[k] = msl[k] " " val($0, "ms_per_iter")
}
/tool=vlfeat/ { k = val($0, "case") " " val($0, "threads"); vll[k] = vll[k] " " val($0, "ms_per_iter") }
/prescott=1/ { pc[val($0, "case")] = val($0, "ms_per_iter") " " val($0, "loglik") }
/ab=/ { k = val($0, "ab") " " val($0, "case"); ab[k] = ab[k] " " val($0, "ms_per_iter") }
END {
    for (t in dgl) { dg[t] = med(dgl[t]); tr[t] = med(trl[t]); ex[t] = med(exl[t]) }
    for (k in vll) vl[k] = med(vll[k])
    for (t in dg)
        printf "threads %s: dgemm %.1f GFLOP/s, triad %.1f GB/s, exp %.3f G/s\n",
               t, dg[t], tr[t], ex[t]
    print ""
    printf "(medians over %d rounds)\n", rounds
    print "| case | thr | ms/iter | roofline ms | x roofline | floor ms | x floor | loglik |"
    print "|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= n; i++) {
        c = val(line[i], "case"); t = val(line[i], "threads")
        ms = med(msl[c " " t]); N = val(line[i], "n")
        d = val(line[i], "d"); K = val(line[i], "k")
        roof = N * K * (2 * d * d + 5 * d) / (dg[t] * 1e9) * 1e3
        floor = (N * d * 8 / (tr[t] * 1e9) + N * K / (ex[t] * 1e9)) * 1e3
        full = c ~ /full/
        rs = full ? sprintf("%.2f | %.2f", roof, ms / roof) : "- | -"
        fs = (!full || c ~ /gmm-b/) ? sprintf("%.2f | %.2f", floor, ms / floor) : "- | -"
        printf "| %s | %s | %.2f | %s | %s | %s |\n", c, t, ms, rs, fs,
               val(line[i], "loglik")
        if (t == 1) base[c] = ms
        if (t == 2 && base[c] > 0) sc[c] = base[c] / ms
    }
    print ""
    for (c in sc) printf "2-thread speed-up %s: %.2fx\n", c, sc[c]
    for (i = 1; i <= n; i++) {
        k = val(line[i], "case") " " val(line[i], "threads")
        if (k in vl)
            printf "VLFeat %s thread(s): %.2f ms/iter, lsegraph %.2fx faster (rounds:%s against%s)\n",
                   k, vl[k], vl[k] / med(msl[k]), vll[k], msl[k]
    }
    for (c in pc) {
        split(pc[c], p, " ")
        printf "OPENBLAS_CORETYPE=Prescott %s: %.2f ms/iter, loglik %s\n", c, p[1], p[2]
    }
    for (k in ab) {
        printf "A/B %s: median %.3f ms/iter of%s\n", k, med(ab[k]), ab[k]
    }
}' rounds="$rounds" "$results"
