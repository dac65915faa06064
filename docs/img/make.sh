#!/bin/sh
# Regenerate the pictures of docs/energyviz.md and docs/gallery.md with the
# commands those pages show. Run from anywhere:
#   docs/img/make.sh [BUILD_DIR [OUT_DIR]]   (default: build, docs/img)
# Needs energyviz (meson's energyviz feature) in BUILD_DIR/tools; the heat
# maps and fit plots (PNG) need the `plots` feature (PLplot) and lsefit.
# The Old Faithful, GDP and DAX fits are made by lsefit with fixed seeds
# (the fitted model files are written next to the pictures).
# tests/test_pictures.c runs this into a scratch OUT_DIR and compares every
# picture with the one checked in (meson test pictures).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build="$root/$build" ;; esac
out=${2:-$here}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ev="$build/tools/energyviz"
lsefit="$build/tools/lsefit"
[ -x "$ev" ] || { echo "make.sh: no $ev (build with -Denergyviz=enabled)" >&2; exit 1; }
[ -x "$lsefit" ] || { echo "make.sh: no $lsefit" >&2; exit 1; }
data="$root/data"
cd "$out"

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
"$ev" stattn -o stattn.svg
"$ev" dma -o dma.svg
"$ev" et -o et.svg
"$ev" capsnet -o capsnet.svg

# Expanded views: attention of causal self-attention, and a GMM fitted to
# Old Faithful drawn on its data (responsibilities of the first 24 rows)
"$ev" self-attention --causal --expand -o self-attention-expanded.svg
"$lsefit" gmm "$data/faithful.csv" -k 2 --seed 1 --quiet -o faithful-gmm.json
"$ev" faithful-gmm.json --data "$data/faithful.csv" --expand \
    --max-rows 24 -o gmm-faithful-expanded.svg

# The composite example spec
"$ev" "$root/models/composite.dot" \
    --title "Composite: memories explain slots, slots explain tokens" \
    -o composite.svg

if "$ev" --help | grep -q -- '--dpi' &&
   "$lsefit" gmm plot --help >/dev/null 2>&1 &&
   ! "$lsefit" gmm plot --help | grep -q 'without PLplot'; then
    # Heat maps (PLplot): responsibilities, DAR resonance and softmax, DAAM
    # importance, the causal mask
    "$ev" faithful-gmm.json --data "$data/faithful.csv" --matrix mixture \
        --max-rows 272 -o gmm-faithful-responsibilities.png
    "$ev" dar-attention --matrix attend --what resonance -o dar-resonance.png
    "$ev" dar-attention --matrix attend --what softmax -o dar-softmax.png
    "$ev" daam --matrix daam --what importance -o daam-importance.png
    "$ev" self-attention --causal --matrix self -o self-attention-softmax.png

    # Fit plots (lsefit, PLplot): Old Faithful, GDP growth, DAX returns
    for what in classification uncertainty density bic; do
        "$lsefit" gmm plot faithful-gmm.json "$data/faithful.csv" \
            --what "$what" -o "faithful-$what.png"
    done
    # Iris: four features, so the classification is a pairs plot
    "$lsefit" gmm "$data/iris.csv" --ignore species -k 3 --seed 1 --quiet \
        -o iris-gmm.json
    "$lsefit" gmm plot iris-gmm.json "$data/iris.csv" -o iris-classification.png
    "$lsefit" slds "$data/gdp_growth.csv" --columns growth_pct --markov -k 2 \
        --seed 1 --quiet -o gdp-slds.json
    "$lsefit" slds plot gdp-slds.json "$data/gdp_growth.csv" -o gdp-slds.png
    "$ev" gdp-slds.json --data "$data/gdp_growth.csv" --matrix dynamics \
        --max-rows 201 -o gdp-slds-posteriors.png
    "$ev" gdp-slds.json --data "$data/gdp_growth.csv" --matrix dynamics \
        --what transition -o gdp-slds-transition.png
    # the latent-state SLDS of the same series (D = 1)
    "$lsefit" slds "$data/gdp_growth.csv" --columns growth_pct --markov -k 2 \
        --latent-dim 1 --n-init 3 --seed 1 --quiet -o gdp-lslds.json
    "$lsefit" slds plot gdp-lslds.json "$data/gdp_growth.csv" -o gdp-lslds.png
fi
