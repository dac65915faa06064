#!/usr/bin/env bash
# lsefit --mpi (docs/mpi.md), TAP output for meson:
#   test_mpi.sh LSEFIT DATA_DIR [COMPARE.py]
# 1. mpirun -n 1, 2 and 4 give the model of the one-process fit (GMM on
#    faithful.csv, Markov and mixture SLDS on dax_returns.csv, shards with
#    sequences and dropped rows at the block boundaries) to 1e-10 relative
#    on the log-likelihood and every parameter (tests/mpi_compare.py); with
#    --exact-sums (statistics summed exactly) bit for bit, also with 3
#    threads; LSEFIT_MPI_CHECK=1 also checks that every reduction
#    leaves the same bits on every process.
# 2. A failing process (bad row, missing shard, fault injected in the middle
#    of EM) ends every process with the same message and exit status 1,
#    within a timeout (no hang).
# TAP "1..0 # SKIP" (exit 0) when mpirun cannot start two processes here.
set -u
LSEFIT=${1:?usage: test_mpi.sh LSEFIT DATA_DIR [COMPARE.py]}
DATA=${2:?usage: test_mpi.sh LSEFIT DATA_DIR [COMPARE.py]}
COMPARE=${3:-$(dirname "$0")/mpi_compare.py}
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
LSEFIT=$(abs "$LSEFIT")
DATA=$(abs "$DATA")
COMPARE=$(abs "$COMPARE")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lsefit_mpi.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1

# mpirun flags that work here: as root Open MPI wants --allow-run-as-root;
# containers have few slots (--oversubscribe) and no network worth probing
# (shared memory only).
MPIRUN=$(command -v mpirun || command -v mpiexec || true)
if [ -z "$MPIRUN" ]; then
    echo "1..0 # SKIP no mpirun"
    exit 0
fi
FLAGS=()
if "$MPIRUN" --version 2>/dev/null | grep -qi "open mpi"; then
    FLAGS+=(--oversubscribe --mca btl self,vader)
    [ "$(id -u)" = 0 ] && FLAGS+=(--allow-run-as-root)
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
fi
# Under the sanitize setup (ASAN_OPTIONS set): full malloc stacks and Open
# MPI's components kept loaded, so that the LeakSanitizer suppressions of
# Open MPI's own leaks (tests/lsan.supp) match; a sanitizer report is then
# a failure, never a reason to skip.
if [ -n "${ASAN_OPTIONS:-}" ]; then
    export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export OMPI_MCA_mca_base_component_disable_dlclose=1
fi
run() { # run P ARGS...: lsefit under mpirun with a timeout
    local p=$1
    shift
    timeout 120 "$MPIRUN" "${FLAGS[@]}" -n "$p" "$LSEFIT" "$@"
}
if ! run 2 gmm "$DATA/faithful.csv" -k 2 --mpi -q -o probe.json \
    >probe.log 2>&1; then
    if grep -q "Sanitizer" probe.log; then
        echo "1..1"
        echo "not ok 1 - mpirun -n 2 under a sanitizer"
        sed 's/^/# /' probe.log | head -60
        exit 1
    fi
    echo "1..0 # SKIP mpirun -n 2 does not work here: $(head -c 300 probe.log)"
    exit 0
fi

n=0
fails=0
ok() { # ok STATUS DESCRIPTION
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        fails=$((fails + 1))
    fi
}
same() { # same REF.json OTHER.json DESCRIPTION [RTOL]
    local out
    out=$(python3 "$COMPARE" "$1" "$2" ${4:+"$4"} 2>&1)
    local st=$?
    echo "$out" | sed 's/^/# /'
    ok $st "$3"
}

export LSEFIT_MPI_CHECK=1
# one thread per process: P processes on a small machine are slow enough
# (the results do not depend on the thread count, docs/performance.md)
export OMP_NUM_THREADS=1 LSE_NUM_THREADS=1

# ---- GMM on faithful.csv -------------------------------------------------
G=(-k 2 --seed 1 --tol 1e-10 --max-iter 1000 -q)
"$LSEFIT" gmm "$DATA/faithful.csv" "${G[@]}" -o gmm1.json
ok $? "gmm: one-process fit"
for p in 1 2 4; do
    run "$p" gmm "$DATA/faithful.csv" "${G[@]}" --mpi -o "gmm_mpi$p.json"
    ok $? "gmm: mpirun -n $p exits 0"
    same gmm1.json "gmm_mpi$p.json" "gmm: mpirun -n $p equals one process"
done
G3=(-k 3 --covariance diag --init random --n-init 2 --standardize --seed 4 -q)
"$LSEFIT" gmm "$DATA/faithful.csv" "${G3[@]}" -o gmm3.json
run 3 gmm "$DATA/faithful.csv" "${G3[@]}" --mpi -o gmm3_mpi.json
ok $? "gmm: random init, standardized, 3 processes"
same gmm3.json gmm3_mpi.json "gmm: random init, standardized, equal"

# SQUAREM: the extrapolation's energy is summed over the processes too
GA=(-k 2 --accel squarem --seed 1 --tol 1e-13 -q)
"$LSEFIT" gmm "$DATA/faithful.csv" "${GA[@]}" -o gmm_sq.json
run 2 gmm "$DATA/faithful.csv" "${GA[@]}" --mpi -o gmm_sq_mpi.json
ok $? "gmm: --accel squarem, 2 processes"
same gmm_sq.json gmm_sq_mpi.json "gmm: --accel squarem equals one process"

# shards: one file per process
mkdir -p shards
head -1 "$DATA/faithful.csv" >shards/h
for r in 0 1 2; do
    { cat shards/h; sed -n "$((2 + r * 91)),$((92 + r * 91))p" \
        "$DATA/faithful.csv"; } >"shards/part-$r.csv"
done
rm shards/h
run 3 gmm --mpi --shards 'shards/part-*.csv' "${G[@]}" -o gmm_shards.json
ok $? "gmm: --shards with 3 processes"
same gmm1.json gmm_shards.json "gmm: --shards equals one process"

# ---- SLDS on dax_returns.csv -------------------------------------------------
# --exact-sums: exact statistics (docs/mpi.md), so the same bits (RTOL 0);
# without it, the same model to 1e-10
for mk in "" "--markov" "--markov --exact-sums" "--exact-sums"; do
    name=${mk:-mixture}
    name=${name// /}
    rtol=""
    case "$mk" in *--exact-sums*) rtol=0 ;; esac
    # shellcheck disable=SC2206
    S=(--columns logret_pct -k 2 $mk --lags 2 --seed 3 -q)
    "$LSEFIT" slds "$DATA/dax_returns.csv" "${S[@]}" -o "slds$name.json"
    ok $? "slds $name: one-process fit"
    for p in 1 2 4; do
        run "$p" slds "$DATA/dax_returns.csv" "${S[@]}" --mpi \
            -o "slds${name}_$p.json"
        ok $? "slds $name: mpirun -n $p exits 0"
        same "slds$name.json" "slds${name}_$p.json" \
            "slds $name: mpirun -n $p equals one process${rtol:+ bit for bit}" \
            $rtol
    done
done
OMP_NUM_THREADS=3 LSE_NUM_THREADS=3 "$LSEFIT" slds "$DATA/dax_returns.csv" \
    --columns logret_pct -k 2 --markov --exact-sums --lags 2 --seed 3 -q \
    -o sldsmt.json
same "slds--markov--exact-sums.json" sldsmt.json \
    "slds --markov --exact-sums: 3 threads equal 1 thread bit for bit" 0
K3=(--columns logret_pct -k 3 --markov --exact-sums --lags 1 --seed 7 -q)
"$LSEFIT" slds "$DATA/dax_returns.csv" "${K3[@]}" -o k3.json
run 3 slds "$DATA/dax_returns.csv" "${K3[@]}" --mpi -o k3_3.json
ok $? "slds --markov K = 3: mpirun -n 3 exits 0"
same k3.json k3_3.json "slds --markov K = 3: mpirun -n 3 bit for bit" 0

# sequences and dropped rows at shard boundaries, shards shorter than L
python3 - "$DATA/dax_returns.csv" <<'EOF'
import csv, os, sys
rows = list(csv.reader(open(sys.argv[1])))[1:]
lines = []
for i, r in enumerate(rows[:900]):
    seq = "a" if i < 300 else ("b" if i < 600 else "c")
    x = "" if i in (150, 151, 450) else r[3]
    lines.append("%s,%s,%s" % (seq, x, rows[i + 900][3]))
open("seq.csv", "w").write("seq,x,y\n" + "\n".join(lines) + "\n")
os.makedirs("sq", exist_ok=True)
cuts = [0, 149, 153, 157, 300, 304, 305, 450, 900]
for k in range(len(cuts) - 1):
    open("sq/part-%d.csv" % k, "w").write(
        "seq,x,y\n" + "\n".join(lines[cuts[k]:cuts[k + 1]]) + "\n")
EOF
for mk in "" "--markov" "--markov --exact-sums"; do
    name=${mk:-mixture}
    name=${name// /}
    # shellcheck disable=SC2206
    S=(--sequence seq --missing drop --lags 3 -k 2 $mk --seed 5 -q)
    "$LSEFIT" slds seq.csv "${S[@]}" -o "seq$name.json"
    run 8 slds --mpi --shards 'sq/part-*.csv' "${S[@]}" -o "seq${name}_8.json"
    ok $? "slds $name: 8 shards across sequences and dropped rows"
    rtol=""
    case "$mk" in *--exact-sums*) rtol=0 ;; esac
    same "seq$name.json" "seq${name}_8.json" \
        "slds $name: shards equal one process" $rtol
done

# ---- latent SLDS (lsefit slds --latent-dim): replicated latent chain,
# observation sums over processes; blocks inside one series, sequences,
# masked entries and shards that cut a sequence
cat >lat_gen.json <<'JSON'
{"model": "slds-latent", "markov": true, "n_modes": 2, "latent_dim": 2,
 "n_features": 4, "feature_names": ["a", "b", "c", "e"],
 "A": [[[0.95, 0.2], [-0.2, 0.95]], [[0.9, 0], [0, 0.5]]],
 "b": [[0.1, 0], [0, -0.5]],
 "Q": [[[0.05, 0], [0, 0.05]], [[0.1, 0.02], [0.02, 0.1]]],
 "C": [[1, 0], [0, 1], [0.5, 0.5], [1, -1]], "d": [0, 1, 2, -1],
 "R_diag": [0.1, 0.2, 0.1, 0.3], "initial_mean": [0, 0],
 "initial_cov": [[1, 0], [0, 1]], "initial": [0.5, 0.5],
 "transition": [[0.97, 0.03], [0.05, 0.95]]}
JSON
"$LSEFIT" slds simulate lat_gen.json -T 600 --seed 5 -o lat.csv
ok $? "latent: simulate 600 rows"
python3 - <<'PY'
import os
rows = [l.split(",")[:4] for l in open("lat.csv").read().split("\n")[1:] if l]
out = []
for i, r in enumerate(rows):
    if i % 37 == 5:
        r[i % 4] = ""            # a masked entry
    out.append("%s,%s" % ("s%d" % (i // 250), ",".join(r)))
open("latseq.csv", "w").write("seq,a,b,c,e\n" + "\n".join(out) + "\n")
os.makedirs("lq", exist_ok=True)
cuts = [0, 120, 250, 251, 480, 600]      # inside, at and next to a change
for k in range(len(cuts) - 1):
    open("lq/part-%d.csv" % k, "w").write(
        "seq,a,b,c,e\n" + "\n".join(out[cuts[k]:cuts[k + 1]]) + "\n")
PY
for mk in "--markov" ""; do
    name=${mk:-mixture}
    name=${name//-/}
    # shellcheck disable=SC2206
    L=(--columns a,b,c,e -k 2 --latent-dim 2 $mk --seed 1 --max-iter 40 -q)
    "$LSEFIT" slds lat.csv "${L[@]}" -o "lat$name.json"
    ok $? "latent $name: one-process fit"
    for p in 1 2 4; do
        run "$p" slds lat.csv "${L[@]}" --mpi -o "lat${name}_$p.json"
        ok $? "latent $name: mpirun -n $p exits 0"
        same "lat$name.json" "lat${name}_$p.json" \
            "latent $name: mpirun -n $p equals one process"
    done
    # shellcheck disable=SC2206
    Q=(--sequence seq --missing marginalize -k 2 --latent-dim 2 $mk --seed 2
        --max-iter 30 -q)
    "$LSEFIT" slds latseq.csv "${Q[@]}" -o "latq$name.json"
    run 3 slds latseq.csv "${Q[@]}" --mpi -o "latq${name}_3.json"
    ok $? "latent $name: sequences and masked entries, 3 processes"
    same "latq$name.json" "latq${name}_3.json" \
        "latent $name: sequences and masked entries equal one process"
    run 5 slds --mpi --shards 'lq/part-*.csv' "${Q[@]}" -o "latq${name}_5.json"
    ok $? "latent $name: 5 shards, one cutting a sequence"
    same "latq$name.json" "latq${name}_5.json" \
        "latent $name: shards equal one process"
done
P=(--sequence seq --missing marginalize -k 2 --latent-dim 2 --markov
    --emission per-mode --seed 2 --max-iter 30 -q)
"$LSEFIT" slds latseq.csv "${P[@]}" -o latpm.json
run 3 slds latseq.csv "${P[@]}" --mpi -o latpm_3.json
ok $? "latent --emission per-mode: 3 processes"
same latpm.json latpm_3.json "latent --emission per-mode: equals one process"
# several lags (--lags 2): the banded smoother runs on the replicated chain
G=(--sequence seq --missing marginalize -k 2 --latent-dim 2 --markov --lags 2
    --seed 2 --max-iter 30 -q)
"$LSEFIT" slds latseq.csv "${G[@]}" -o latlag.json
ok $? "latent --lags 2: one-process fit"
run 3 slds latseq.csv "${G[@]}" --mpi -o latlag_3.json
ok $? "latent --lags 2: 3 processes"
same latlag.json latlag_3.json "latent --lags 2: 3 processes equal one process"
run 5 slds --mpi --shards 'lq/part-*.csv' "${G[@]}" -o latlag_5.json
ok $? "latent --lags 2: 5 shards, one cutting a sequence"
same latlag.json latlag_5.json "latent --lags 2: shards equal one process"

# ---- failures: same message everywhere, status 1, no hang -------------------
failure() { # failure P PATTERN DESCRIPTION ARGS...
    local p=$1 pat=$2 desc=$3
    shift 3
    run "$p" "$@" >fail.out 2>fail.err
    local st=$?
    local lines distinct
    lines=$(grep -c "^lsefit: process" fail.err)
    distinct=$(grep "^lsefit: process" fail.err | sort -u | wc -l)
    grep "^lsefit: process" fail.err | sort -u | sed 's/^/# /'
    [ "$st" != 0 ] && [ "$st" != 124 ] && [ "$lines" = "$p" ] &&
        [ "$distinct" = 1 ] && grep -q -- "$pat" fail.err
    ok $? "$desc (status $st, $lines messages)"
}
sed '250s/,.*/,abc/' "$DATA/faithful.csv" >bad.csv
failure 4 "bad.csv:250:2: 'abc' is not a number" \
    "bad row on line 250: every process reports it" \
    gmm bad.csv -k 2 --mpi -o x.json
ln -s "$TMP/nonexistent.csv" shards/part-3.csv
failure 4 "cannot open 'shards/part-3.csv'" \
    "unreadable shard: every process reports it" \
    gmm --mpi --shards 'shards/part-*.csv' -k 2 -o x.json
failure 2 "matches 4 files but there are 2 processes" \
    "wrong number of shards" \
    gmm --mpi --shards 'shards/part-*.csv' -k 2 -o x.json
rm shards/part-3.csv
{ head -1 "$DATA/faithful.csv"; echo "1.5,"; } >shards/part-1.csv
failure 3 "shards/part-1.csv:2:.*missing value" \
    "bad row in a shard" \
    gmm --mpi --shards 'shards/part-*.csv' -k 2 -o x.json
for at in 3 12 25; do
    LSEFIT_MPI_FAULT=1:$at failure 3 "fault injected at reduction $at" \
        "process 1 fails at its reduction $at (mid-fit): no hang" \
        gmm "$DATA/faithful.csv" -k 3 --mpi -o x.json
done
LSEFIT_MPI_FAULT=2:20 failure 3 "fault injected at reduction 20" \
    "slds --markov: process 2 fails mid-fit" \
    slds "$DATA/dax_returns.csv" --columns logret_pct -k 2 --markov --mpi \
    -o x.json
LSEFIT_MPI_FAULT=1:7 failure 2 "fault injected at reduction 7" \
    "latent slds: process 1 fails mid-fit: no hang" \
    slds lat.csv --columns a,b,c,e -k 2 --latent-dim 2 --mpi -o x.json
failure 2 "k = 300 > 272 samples\|usable rows but K = 300" \
    "an error of every process (K > N)" \
    gmm "$DATA/faithful.csv" -k 300 --mpi -o x.json
# all outputs or none: process 0 commits before the outcome is agreed
rm -f y.json
failure 2 "cannot write '/dev/full'" \
    "an output fails on process 0: every process reports it" \
    gmm "$DATA/faithful.csv" -k 2 --mpi -o y.json --log-json /dev/full
[ ! -e y.json ] && ! ls ./*.tmp.* >/dev/null 2>&1
ok $? "... and no output file or temporary file is left"

# values near the overflow threshold: --standardize divides by the largest
# |value| before it sums, on every process as on one; without it a value
# whose square overflows is refused by the process that holds it
awk -F, 'NR == 1 {print; next} {printf "%.17g,%.17g\n", $1 * 1e306, $2 * 1e306}' \
    "$DATA/faithful.csv" >huge.csv
G4=(-k 2 --standardize -q --seed 1)
"$LSEFIT" gmm huge.csv "${G4[@]}" -o huge1.json
run 2 gmm huge.csv "${G4[@]}" --mpi -o huge_mpi.json
ok $? "gmm: values near 1e308, standardized, 2 processes"
same huge1.json huge_mpi.json "gmm: values near 1e308, standardized, equal"
sed '250s/^\([^,]*\),.*/\1,1e200/' "$DATA/faithful.csv" >one.csv
failure 2 "one.csv:250:2: value 1e+200 (column 'waiting') is too large" \
    "a value too large for a covariance: every process reports it" \
    gmm one.csv -k 2 --mpi -o x.json

echo "1..$n"
[ "$fails" = 0 ]
