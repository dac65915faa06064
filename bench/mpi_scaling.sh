#!/usr/bin/env bash
# Strong scaling and agreement of lsefit --mpi (docs/mpi.md).
#
#   bench/mpi_scaling.sh [BUILD_DIR]      (default build-mpi)
#
# Environment: N rows (default 1000000), ITER EM iterations of the timed
# fits (default 20), PROCS process counts of the table (default "1 2"),
# AGREE process counts of the agreement check (default "1 2 4"; "" skips
# it), REPEAT runs of every timed fit, the fastest kept (default 3: the
# machine may be shared), ONLY a grep pattern selecting the models of the
# scaling table (default all: gmm, slds mixture, slds markov, slds markov
# --exact-sums), WORK a
# directory for the data (default a temporary one, removed at the end).
#
# 1. Data: N rows from a 4-component, 4-d full-covariance mixture (lsefit
#    gmm sample) and N steps of a 3-mode, 2-d Markov SLDS (lsefit slds
#    simulate), both from parameter files written here.
# 2. Agreement: the one-process fit (no --mpi) against mpirun -n P --mpi
#    for GMM, SLDS mixture and SLDS Markov, largest relative difference over
#    the log-likelihood and every parameter (tests/mpi_compare.py; 0 with
#    --exact-sums, whose statistics are summed exactly); for the Markov
#    model also the one-process fit on the data with every other value moved
#    by one ulp (how much the fit itself depends on the last bit).
# 3. Strong scaling: ITER EM iterations (--tol 0), one thread per process,
#    wall time split into reading and fitting (LSEFIT_MPI_STATS), the
#    number of reductions and the doubles summed per EM iteration (from a
#    run with --max-iter 0 subtracted), i.e. the bytes each process sends
#    into MPI_Allreduce per iteration.
# Prints Markdown tables.
set -u
BUILD=${1:-build-mpi}
N=${N:-1000000}
ITER=${ITER:-20}
PROCS=${PROCS:-"1 2"}
AGREE=${AGREE-"1 2 4"}
REPEAT=${REPEAT:-3}
ONLY=${ONLY:-.}
HERE=$(cd "$(dirname "$0")" && pwd)
LSEFIT=$(cd "$BUILD/tools" && pwd)/lsefit
COMPARE=$HERE/../tests/mpi_compare.py
[ -x "$LSEFIT" ] || { echo "no $LSEFIT: build with -Dmpi=enabled" >&2; exit 1; }
if [ -n "${WORK:-}" ]; then
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/lsefit_mpi_bench.XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
fi
cd "$WORK" || exit 1
MPIRUN=$(command -v mpirun || command -v mpiexec) || {
    echo "no mpirun" >&2
    exit 1
}
FLAGS=()
if "$MPIRUN" --version 2>/dev/null | grep -qi "open mpi"; then
    FLAGS+=(--oversubscribe --mca btl self,vader)
    [ "$(id -u)" = 0 ] && FLAGS+=(--allow-run-as-root)
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
fi
CORES=$(getconf _NPROCESSORS_ONLN)
export OMP_NUM_THREADS=1 LSE_NUM_THREADS=1
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
mpi() { # mpi P ARGS...
    local p=$1
    shift
    "$MPIRUN" "${FLAGS[@]}" -n "$p" "$LSEFIT" "$@"
}

# ---- data -------------------------------------------------------------------
cat >gmm_truth.json <<'EOF'
{"model": "gmm", "covariance_type": "full", "n_components": 4, "n_features": 4,
 "feature_names": ["x1", "x2", "x3", "x4"],
 "weights": [0.4, 0.3, 0.2, 0.1],
 "means": [[0, 0, 0, 0], [3, 1, -2, 0.5], [-2, 4, 1, -1], [1, -3, 3, 2]],
 "covariances": [[[1, 0.3, 0, 0], [0.3, 1, 0.2, 0], [0, 0.2, 1, 0.1], [0, 0, 0.1, 1]],
                 [[0.5, 0, 0, 0], [0, 0.8, 0, 0], [0, 0, 1.2, 0.3], [0, 0, 0.3, 0.7]],
                 [[2, 0.5, 0.1, 0], [0.5, 1, 0, 0], [0.1, 0, 0.6, 0], [0, 0, 0, 0.9]],
                 [[0.3, 0, 0, 0], [0, 0.3, 0, 0], [0, 0, 0.3, 0], [0, 0, 0, 0.3]]]}
EOF
cat >slds_truth.json <<'EOF'
{"model": "slds", "markov": true, "n_modes": 3, "n_features": 2,
 "feature_names": ["y1", "y2"], "weights": [0.34, 0.33, 0.33],
 "A": [[[0.9, 0.1], [-0.1, 0.8]], [[0.5, -0.3], [0.2, 0.6]], [[-0.4, 0.0], [0.1, 0.3]]],
 "b": [[0.5, -0.2], [-1.0, 1.0], [2.0, 0.5]],
 "covariances": [[[0.10, 0.02], [0.02, 0.08]], [[0.20, -0.05], [-0.05, 0.15]],
                 [[0.05, 0.0], [0.0, 0.05]]],
 "transition": [[0.97, 0.02, 0.01], [0.02, 0.96, 0.02], [0.01, 0.02, 0.97]],
 "initial": [0.34, 0.33, 0.33]}
EOF
"$LSEFIT" gmm sample gmm_truth.json -n "$N" --seed 1 -o gmm.csv -q || exit 1
"$LSEFIT" slds simulate slds_truth.json -T "$N" --seed 1 -o slds.csv -q ||
    exit 1
echo "# lsefit --mpi on $CORES cores, N = $N rows"
echo

# the fits: NAME|DATA|ARGS
CASES=("gmm|gmm.csv|gmm gmm.csv -k 4 --seed 2 --tol 1e-8"
    "slds mixture|slds.csv|slds slds.csv -k 3 --seed 1"
    "slds markov|slds.csv|slds slds.csv -k 3 --markov --seed 1"
    "slds markov --exact-sums|slds.csv|slds slds.csv -k 3 --markov --exact-sums --seed 1")

# ---- agreement -----------------------------------------------------------------
[ -n "$AGREE" ] && echo "## Agreement with the one-process fit (converged, default tolerance)"
[ -n "$AGREE" ] && echo &&
    echo "| model | processes | largest relative difference | iterations |" &&
    echo "|---|---|---|---|"
for c in "${CASES[@]}"; do
    [ -n "$AGREE" ] || break
    IFS='|' read -r name data args <<<"$c"
    # shellcheck disable=SC2086
    "$LSEFIT" $args -q -o ref.json || exit 1
    it=$(python3 -c "import json;print(json.load(open('ref.json'))['n_iter'])")
    for p in $AGREE; do
        # shellcheck disable=SC2086
        mpi "$p" $args --mpi -q -o "p$p.json" || exit 1
        d=$(python3 "$COMPARE" ref.json "p$p.json" | awk 'NR == 1 {print $4}')
        echo "| $name | $p | $d | $it |"
    done
    if [ "$name" = "slds markov" ]; then
        python3 - "$data" <<'EOF'
import math, sys
src = sys.argv[1]
with open(src) as f, open("ulp.csv", "w") as g:
    g.write(f.readline())
    for i, line in enumerate(f):
        a, b = line.strip().split(",")
        if i % 2 == 0:
            a = repr(math.nextafter(float(a), math.inf))
        g.write(a + "," + b + "\n")
EOF
        # shellcheck disable=SC2086
        "$LSEFIT" ${args/$data/ulp.csv} -q -o ulp.json || exit 1
        d=$(python3 "$COMPARE" ref.json ulp.json | awk 'NR == 1 {print $4}')
        echo "| $name, one process, every other y1 moved by 1 ulp | 1 | $d | |"
    fi
done
[ -n "$AGREE" ] && echo

# ---- strong scaling ----------------------------------------------------------------
echo "## Strong scaling: $ITER EM iterations, one thread per process" \
    "(fastest of $REPEAT runs)"
echo
echo "| model | processes | wall s | reading s | fitting s | fit speed-up |" \
    "reductions | doubles per EM iteration | bytes per EM iteration |" \
    "s in reductions |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in "${CASES[@]}"; do
    IFS='|' read -r name data args <<<"$c"
    echo "$name" | grep -q -- "$ONLY" || continue
    best=""
    for r in $(seq "$REPEAT"); do
        t0=$(now)
        # shellcheck disable=SC2086
        "$LSEFIT" $args --tol 0 --max-iter "$ITER" -q -o serial.json || exit 1
        t1=$(now)
        w=$(calc "$t1 - $t0")
        [ -z "$best" ] || awk "BEGIN { exit !($w < $best) }" && best=$w
    done
    echo "| $name | serial (no --mpi) | $best | | | | | | | |"
    base=""
    for p in $PROCS; do
        # doubles reduced by initialization alone (--max-iter 0)
        # shellcheck disable=SC2086
        init=$(LSEFIT_MPI_STATS=1 mpi "$p" $args --tol 0 --max-iter 0 --mpi \
            -q -o init.json 2>&1 |
            sed -n 's/.* reductions, \([0-9]*\) doubles.*/\1/p')
        line=""
        wall=""
        for r in $(seq "$REPEAT"); do
            t0=$(now)
            # shellcheck disable=SC2086
            l=$(LSEFIT_MPI_STATS=1 mpi "$p" $args --tol 0 --max-iter "$ITER" \
                --mpi -q -o "s$p.json" 2>&1 | grep "lsefit: mpi:")
            t1=$(now)
            f=$(echo "$l" | sed -n 's/.* s reading, \([0-9.]*\) s after.*/\1/p')
            old=$(echo "$line" |
                sed -n 's/.* s reading, \([0-9.]*\) s after.*/\1/p')
            if [ -z "$line" ] || awk "BEGIN { exit !($f < $old) }"; then
                line=$l
                wall=$(calc "$t1 - $t0")
            fi
        done
        red=$(echo "$line" | sed -n 's/.*, \([0-9]*\) reductions.*/\1/p')
        dbl=$(echo "$line" | sed -n 's/.* reductions, \([0-9]*\) doubles.*/\1/p')
        ins=$(echo "$line" | sed -n 's/.*bytes), \([0-9.]*\) s in reductions.*/\1/p')
        rd=$(echo "$line" | sed -n 's/.*process 0: \([0-9.]*\) s reading.*/\1/p')
        fit=$(echo "$line" | sed -n 's/.* s reading, \([0-9.]*\) s after.*/\1/p')
        [ -z "$base" ] && base=$fit
        it=$(python3 -c "import json;print(json.load(open('s$p.json'))['n_iter'])")
        per=$(((dbl - init) / it))
        echo "| $name | $p | $wall | $rd | $fit |" \
            "$(calc "$base / $fit") | $red | $per | $((per * 8)) | $ins |"
    done
done
