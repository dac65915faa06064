#!/bin/sh
# Fitted-model fingerprint for refactors: runs a fixed set of lsefit fits
# on the bundled data and writes every output into OUT_DIR. A refactor
# that changes nothing leaves every file byte-identical:
#
#   bench/fingerprint.sh build /tmp/before    # on the old tree
#   bench/fingerprint.sh build /tmp/after     # on the new tree
#   diff -r /tmp/before /tmp/after && echo identical
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: fingerprint.sh BUILD_DIR OUT_DIR}
out=${2:?usage: fingerprint.sh BUILD_DIR OUT_DIR}
lsefit="$build/tools/lsefit"
d="$src/data"
mkdir -p "$out"
n=0
fit() {
    name=$1; shift
    n=$((n + 1))
    "$lsefit" "$@" -q -o "$out/$name.json" >"$out/$name.out" 2>"$out/$name.err" || echo "exit $?" >>"$out/$name.err"
}
for cov in full diag spherical tied; do
    fit gmm-faithful-$cov gmm "$d/faithful.csv" -k 3 --covariance $cov --seed 3
    fit gmm-iris-$cov gmm "$d/iris.csv" --ignore species -k 3 --covariance $cov --n-init 3 --seed 1
    fit slds-gdp-$cov slds "$d/gdp_growth.csv" --columns growth_pct -k 2 --covariance $cov --seed 2
done
fit gmm-faithful-select gmm "$d/faithful.csv" -k 1:5 --seed 0
fit gmm-faithful-std gmm "$d/faithful.csv" -k 2 --standardize --init random --seed 5
fit gmm-iris-marg gmm "$d/iris.csv" --ignore species -k 2 --missing marginalize
fit gmm-digits-diag gmm "$d/digits.csv" --ignore label -k 10 --covariance diag --max-iter 30 --reg-covar 1e-3
fit slds-gdp-markov slds "$d/gdp_growth.csv" --columns growth_pct -k 2 --markov --seed 1
fit slds-gdp-markov-lag2 slds "$d/gdp_growth.csv" --columns growth_pct -k 3 --markov --lags 2
fit slds-dax-markov slds "$d/dax_returns.csv" --columns logret_pct -k 2 --markov --exact-sums
fit slds-dax-mix slds "$d/dax_returns.csv" --columns logret_pct -k 3 --standardize
fit slds-gdp-select slds "$d/gdp_growth.csv" --columns growth_pct -k 1:3 --markov
"$lsefit" gmm predict "$out/gmm-faithful-full.json" "$d/faithful.csv" --proba "$out/pred-proba.csv" >"$out/pred.txt" 2>&1 || true
"$lsefit" gmm score "$out/gmm-faithful-full.json" "$d/faithful.csv" >"$out/score.txt" 2>&1 || true
"$lsefit" gmm sample "$out/gmm-faithful-full.json" -n 20 --seed 1 >"$out/sample.txt" 2>&1 || true
"$lsefit" slds segment "$out/slds-gdp-markov.json" "$d/gdp_growth.csv" --columns growth_pct >"$out/segment.txt" 2>&1 || true
"$lsefit" slds simulate "$out/slds-gdp-markov.json" -T 30 --seed 4 >"$out/simulate.txt" 2>&1 || true
# Missing values: Iris (Faithful) with cells blanked by a fixed rule
# (row 40 entirely), read from stdin so that the model files name "-".
miss() {
    awk -F, -v OFS=, -v m="$2" 'NR > 1 { for (j = 1; j <= m; j++)
        if ((NR * 7 + j * 5) % 13 == 0 || NR == 41) $j = "" } { print }' "$1"
}
fitm() {
    name=$1; src_csv=$2; cols=$3; shift 3
    n=$((n + 1))
    miss "$src_csv" "$cols" | "$lsefit" "$@" -q -o "$out/$name.json" >"$out/$name.out" 2>"$out/$name.err" || echo "exit $?" >>"$out/$name.err"
}
for cov in full diag spherical tied; do
    fitm gmm-iris-miss-$cov "$d/iris.csv" 4 gmm - --ignore species -k 3 --covariance $cov --missing marginalize --n-init 2 --seed 1
done
fitm gmm-iris-miss-random "$d/iris.csv" 4 gmm - --ignore species -k 4 --missing marginalize --init random --seed 7
fitm gmm-iris-miss-std "$d/iris.csv" 4 gmm - --ignore species -k 2 --covariance diag --missing marginalize --standardize --seed 2
fitm gmm-faithful-miss "$d/faithful.csv" 2 gmm - -k 3 --missing marginalize --seed 3
for cov in full diag; do
    miss "$d/iris.csv" 4 | "$lsefit" gmm predict "$out/gmm-iris-miss-$cov.json" - --missing marginalize --proba "$out/pred-miss-$cov.csv" >"$out/pred-miss-$cov.txt" 2>&1 || true
    miss "$d/iris.csv" 4 | "$lsefit" gmm score "$out/gmm-iris-miss-$cov.json" - --missing marginalize >"$out/score-miss-$cov.txt" 2>&1 || true
done
echo "$n fits written to $out"
