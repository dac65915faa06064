#!/bin/bash
# Instructions of issue 16's eight default fits (docs/performance.md,
# "Session 17"): `lsefit --threads 1 gmm DATA -k 1:8 --covariance C -q` on
# Faithful and Iris (columns 1-4) under valgrind's callgrind, one line per
# cell and the total, in millions.
#
#   bench/cells_instructions.sh BUILD_DIR [OUT_DIR]
#
# OUT_DIR (default: a temporary directory) keeps the callgrind files for
# callgrind_annotate.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: cells_instructions.sh BUILD_DIR [OUT_DIR]}
out=${2:-$(mktemp -d "${TMPDIR:-/tmp}/cells_instr.XXXXXX")}
mkdir -p "$out"
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }
total=0
for d in faithful iris; do
    for c in full diag spherical tied; do
        extra=()
        [ $d = iris ] && extra=(--ignore species)
        valgrind --tool=callgrind --callgrind-out-file="$out/$d.$c.cg" \
            "$build/tools/lsefit" --threads 1 gmm "$src/data/$d.csv" -k 1:8 \
            --covariance $c -q "${extra[@]}" >/dev/null 2>"$out/$d.$c.err"
        n=$(grep -o 'refs: *[0-9,]*' "$out/$d.$c.err" | tr -d ', ' | cut -d: -f2)
        total=$((total + n))
        awk -v d=$d -v c=$c -v n="$n" 'BEGIN { printf "%s %s %.1f\n", d, c, n / 1e6 }'
    done
done
awk -v n="$total" 'BEGIN { printf "total %.1f\n", n / 1e6 }'
