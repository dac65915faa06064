#!/bin/sh
# Regenerate the pictures of docs/energyviz.md. Run from anywhere:
#   docs/img/make.sh [BUILD_DIR]        (default: build)
# Needs energyviz (meson's energyviz feature) in BUILD_DIR/tools. The Old
# Faithful fit uses lsefit when it is built (BUILD_DIR/tools/lsefit) and
# otherwise the fitted model checked in next to this script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build="$root/$build" ;; esac
ev="$build/tools/energyviz"
lsefit="$build/tools/lsefit"
[ -x "$ev" ] || { echo "make.sh: no $ev (build with -Denergyviz=enabled)" >&2; exit 1; }
cd "$here"

# Every built-in model with its default sizes
"$ev" gmm -o gmm.svg
"$ev" hopfield -o hopfield.svg
"$ev" cross-attention -o cross-attention.svg
"$ev" self-attention --causal -o self-attention.svg
"$ev" slot-attention -o slot-attention.svg
"$ev" predcoding -o predcoding.svg
"$ev" slds -o slds.svg
"$ev" slds --markov -k 3 -o slds-markov.svg
"$ev" layernorm -o layernorm.svg
"$ev" idwnet -o idwnet.svg
"$ev" daam -o daam.svg
"$ev" dar-attention -o dar-attention.svg

# Expanded views: attention of causal self-attention, and a GMM fitted to
# Old Faithful drawn on its data (responsibilities of the first 24 rows)
"$ev" self-attention --causal --expand -o self-attention-expanded.svg
if [ -x "$lsefit" ]; then
    (cd "$root" && "$lsefit" gmm data/faithful.csv -k 2 --seed 1 --quiet \
        -o docs/img/faithful-gmm.json)
fi
"$ev" faithful-gmm.json --data "$root/data/faithful.csv" --expand \
    --max-rows 24 -o gmm-faithful-expanded.svg
"$ev" faithful-gmm.json --data "$root/data/faithful.csv" --matrix mixture \
    --max-rows 40 -o gmm-faithful-responsibilities.svg

# Matrix views: the DAR resonance map r_ij and DAAM importance factors
"$ev" dar-attention --matrix attend --what resonance -o dar-resonance.svg
"$ev" dar-attention --matrix attend --what softmax -o dar-softmax.svg
# (DAAM: 4 heads fitted to convergence on 40 vectors around 4 centres)
"$ev" daam --matrix daam --what importance -o daam-importance.svg

# The composite example spec
"$ev" "$root/models/composite.dot" \
    --title "Composite: memories explain slots, slots explain tokens" \
    -o composite.svg
