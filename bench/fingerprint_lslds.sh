#!/bin/sh
# Fingerprint of the latent SLDS command (lsefit slds --latent-dim), the
# companion of bench/fingerprint.sh for refactors of tools/lsefit_lslds.c:
# fits, outputs, help texts and error messages, every one into OUT_DIR.
#
#   bench/fingerprint_lslds.sh build /tmp/before   # on the old tree
#   bench/fingerprint_lslds.sh build /tmp/after    # on the new tree
#   diff -r /tmp/before /tmp/after && echo identical
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: fingerprint_lslds.sh BUILD_DIR OUT_DIR}
out=${2:?usage: fingerprint_lslds.sh BUILD_DIR OUT_DIR}
lsefit="$build/tools/lsefit"
d="$src/data"
mkdir -p "$out"
n=0
run() {
    name=$1; shift
    n=$((n + 1))
    "$lsefit" "$@" >"$out/$name.out" 2>"$out/$name.err" || echo "exit $?" >>"$out/$name.err"
}
g="$d/gdp_growth.csv"
run fit-mix slds "$g" --columns growth_pct -k 2 --latent-dim 1 --max-iter 30 -o "$out/mix.json"
run fit-markov slds "$g" --columns growth_pct -k 2 --latent-dim 1 --markov --n-init 2 --max-iter 30 -o "$out/markov.json"
run fit-markov-q slds "$g" --columns growth_pct -k 2 --latent-dim 1 --markov --max-iter 20 --fit-initial -q -o "$out/markov-q.json"
run fit-select slds "$g" --columns growth_pct -k 1:2 --latent-dim 1 --markov --max-iter 20 -o "$out/select.json"
run fit-faithful slds "$d/faithful.csv" -k 2 --latent-dim 1:2 --max-iter 15 --seed 3 -o "$out/faithful.json"
run fit-permode slds "$d/faithful.csv" -k 2 --latent-dim 1 --emission per-mode --max-iter 15 -o "$out/permode.json"
run fit-heldout slds "$g" --columns growth_pct -k 1:2 --latent-dim 1 --max-iter 10 --select heldout --validation "$g" --samples 50 -o "$out/heldout.json"
run segment slds segment "$out/markov.json" "$g" --columns growth_pct --variances
run segment-o slds segment "$out/mix.json" "$g" --columns growth_pct -o "$out/segment.csv"
run score slds score "$out/markov.json" "$g" --columns growth_pct --samples 200 --seed 1
run simulate slds simulate "$out/markov.json" -T 40 --seed 3
run help slds --latent-dim 1 --help
run help-short slds --help
# the options every fit takes (the shared pipeline, tools/lsefit_fit.c)
run fit-maxiter0 slds "$g" --columns growth_pct -k 2 --latent-dim 1 --max-iter 0 -o "$out/maxiter0.json"
run fit-verbose slds "$g" --columns growth_pct -k 2 --latent-dim 1 --markov --max-iter 30 -v -o "$out/verbose.json"
run fit-tol slds "$d/faithful.csv" -k 2 --latent-dim 2 --tol 1e-3 --reg-covar 1e-5 --seed 2 -o "$out/tol.json"
run fit-aic slds "$g" --columns growth_pct -k 1:2 --latent-dim 1 --select aic --max-iter 20 -o "$out/aic.json"
run simulate-modes slds simulate "$out/markov.json" -T 5 --seed 3 --modes "$out/modes.csv"
run err-covariance slds "$g" --columns growth_pct -k 2 --latent-dim 1 --covariance diag -o "$out/x.json"
run err-segment-opt slds segment "$out/markov.json" "$g" --columns growth_pct --samples 5
run err-nok slds "$g" --columns growth_pct --latent-dim 1 -o "$out/x.json"
run err-noout slds "$g" --columns growth_pct -k 2 --latent-dim 1
run err-d slds "$g" --columns growth_pct -k 2 --latent-dim 3 -o "$out/x.json"
run err-drange slds "$g" --columns growth_pct -k 2 --latent-dim 3:1 -o "$out/x.json"
run err-dbad slds "$g" --columns growth_pct -k 2 --latent-dim x -o "$out/x.json"
run err-select slds "$g" --columns growth_pct -k 2 --latent-dim 1 --select aic -o "$out/x.json"
run err-heldout slds "$g" --columns growth_pct -k 1:2 --latent-dim 1 --select heldout -o "$out/x.json"
run err-emission slds "$g" --columns growth_pct -k 2 --latent-dim 1 --emission x -o "$out/x.json"
run err-shards slds "$g" --columns growth_pct -k 2 --latent-dim 1 --shards 'a%d' -o "$out/x.json"
run err-file slds "$d/nonexistent.csv" -k 2 --latent-dim 1 -o "$out/x.json"
run err-col slds "$g" --columns nothere -k 2 --latent-dim 1 -o "$out/x.json"
run err-extra slds "$g" extra --columns growth_pct -k 2 --latent-dim 1 -o "$out/x.json"
run err-segment slds segment "$out/markov.json"
run err-simulate slds simulate "$out/markov.json"
run err-mpi slds segment "$out/markov.json" "$g" --columns growth_pct --latent-dim 1 --mpi
# Faithful with cells blanked by a fixed rule (missing observations)
awk -F, -v OFS=, 'NR > 1 { for (j = 1; j <= 2; j++) if ((NR * 7 + j * 5) % 13 == 0) $j = "" } { print }' \
    "$d/faithful.csv" >"${TMPDIR:-/tmp}/fingerprint_lslds_miss.csv"
run fit-miss slds "${TMPDIR:-/tmp}/fingerprint_lslds_miss.csv" -k 2 --latent-dim 1 --missing marginalize --max-iter 10 --seed 1 -o "$out/miss.json"
run err-miss slds "${TMPDIR:-/tmp}/fingerprint_lslds_miss.csv" -k 2 --latent-dim 1 --max-iter 10 -o "$out/x.json"
# a constant column: refused unless --reg-covar
printf 'a,b\n1.5,2\n0.3,2\n-0.7,2\n2.2,2\n0.1,2\n' >"${TMPDIR:-/tmp}/fingerprint_lslds_const.csv"
run err-const slds "${TMPDIR:-/tmp}/fingerprint_lslds_const.csv" -k 1 --latent-dim 1 -o "$out/x.json"
# a fit that fails (8 rows, one blank): its message and hint
printf 'growth_pct\n1.0\n\n2.0\n0.5\n1.5\n0.2\n0.9\n1.1\n' >"${TMPDIR:-/tmp}/fingerprint_lslds_tiny.csv"
run err-fitfail slds "${TMPDIR:-/tmp}/fingerprint_lslds_tiny.csv" -k 2 --latent-dim 1 --max-iter 10 -o "$out/x.json"
# messages name the output folder: OUT/ instead, so two folders compare
for f in "$out"/*.err "$out"/*.out; do
    sed "s|$out/|OUT/|g" "$f" >"$f.tmp" && mv "$f.tmp" "$f"
done
echo "$n runs written to $out"
