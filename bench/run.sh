#!/bin/sh
# The whole benchmark of docs/performance.md: lsegraph against
# scikit-learn's GaussianMixture, VLFeat's vl_gmm (diagonal), Armadillo's
# gmm_full/gmm_diag (C++, OpenMP) and a NumPy SLDS
# EM, same data, same initialization, same iteration count, with 1 and 2
# threads, plus the dgemm rate of this machine and the streaming
# self-attention memory test. Prints the RESULT lines, then the table.
#
#   bench/run.sh [BUILD_DIR [DATA_DIR]]
#
# BUILD_DIR (default build-perf) should be configured with
# -Dbuildtype=release. Data sets are generated once into DATA_DIR (default
# BUILD_DIR/bench-data). Environment:
#   THREADS="1 2"        thread counts to run
#   OPENBLAS_CORETYPE    default Haswell: OpenBLAS 0.3.21's runtime CPU
#                        detection does not know this CPU model and falls
#                        back to its Prescott (SSE3) kernels, 4-5x slower;
#                        every program (lsegraph, NumPy/scikit-learn,
#                        dgemm_peak) gets the same setting.
#                        (liblsegraph itself no longer needs it: it switches
#                        OpenBLAS off that fallback when loaded, lib/threads.c)
#   SKIP_NUMPY_MARKOV=1  skip the slow NumPy Markov reference (minutes)
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-perf}
data=${2:-$build/bench-data}
threads=${THREADS:-"1 2"}
py=/usr/bin/python3
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"

targets="bench/lse_bench_gen bench/lse_bench bench/dgemm_peak"
for peer in vlfeat_gmm arma_gmm; do
    if ninja -C "$build" -t targets all 2>/dev/null | grep -q "^bench/$peer:"; then
        targets="$targets bench/$peer"
    fi
done
# shellcheck disable=SC2086
ninja -C "$build" $targets >/dev/null

if [ ! -f "$data/slds_p0.bin" ]; then
    mkdir -p "$data"
    "$build/bench/lse_bench_gen" "$data"
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT
run() {
    "$@" | tee -a "$results"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs;" \
     "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
echo "start: $(uptime)"
for t in $threads; do
    export OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" LSE_NUM_THREADS="$t"
    run "$build/bench/dgemm_peak" "$t"
    for tag in a b c; do
        for cov in full diag; do
            run "$build/bench/lse_bench" gmm "$data" "$tag" "$cov" "$t"
            (cd "$src/bench" && run "$py" sklearn_gmm.py "$data" "$tag" "$cov")
            if [ "$cov" = diag ] && [ -x "$build/bench/vlfeat_gmm" ]; then
                run "$build/bench/vlfeat_gmm" "$data" "$tag" "$t"
            fi
            if [ -x "$build/bench/arma_gmm" ]; then
                run "$build/bench/arma_gmm" "$data" "$tag" "$cov" "$t"
            fi
        done
    done
    for kind in mixture markov; do
        run "$build/bench/lse_bench" slds "$data" "$kind" "$t"
        if [ "$kind" = mixture ] || [ "${SKIP_NUMPY_MARKOV:-0}" != 1 ]; then
            (cd "$src/bench" && run "$py" slds_numpy.py "$data" "$kind")
        fi
    done
    run "$build/bench/lse_bench" attention 65536 64 "$t"
done
echo "end: $(uptime)"
echo
"$py" "$src/bench/table.py" "$results"
