#!/usr/bin/env bash
# The light lsefit and lsefit-full (docs/design-notes.md "lsefit and
# lsefit-full"), TAP output for meson:
#   test_lsefit_light.sh LSEFIT LSEFIT_FULL|none MPI PLOTS LIBLSEGRAPH DATA_DIR STATIC
# MPI and PLOTS are 1 when lsefit-full links them, STATIC when lsefit links
# liblsegraph and OpenBLAS statically (meson.build, static_lsefit). Checks:
# 1. lsefit --version loads neither libmpi nor libplplot;
# 2. lsefit-full does load what it was built with (so check 1 can fail);
# 3. lsefit gmm plot through the light lsefit draws the figure: it replaced
#    itself by lsefit-full (libplplot is loaded in that process);
# 4. a copy of lsefit with no lsefit-full next to it (nor installed) says
#    what is missing, as before;
# 5. with STATIC, lsefit loads neither liblsegraph nor libopenblas, and
#    libgsl's CBLAS calls bind to the program's own OpenBLAS.
set -u
LSEFIT=$1 FULL=$2 MPI=$3 PLOTS=$4 LIBLSE=$5 DATA=$6 STATIC=$7
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lsefit_light.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/tap.sh"
# the copy without lsefit-full: "built without WHAT", status 1, no OUT
missing() {
    local what=$1 out=$2
    shift 2
    "$TMP/alone/lsefit" "$@" >"$TMP/out" 2>&1
    local rc=$?
    if [ $rc = 1 ] && grep -q "built without $what" "$TMP/out" &&
        [ ! -e "$out" ]; then
        ok "without lsefit-full: built without $what"
    else
        not_ok "without lsefit-full: built without $what (status $rc)"
        show "$TMP/out"
    fi
}
echo "1..6"

# 1. the light lsefit's loaded objects
LD_TRACE_LOADED_OBJECTS=1 "$LSEFIT" --version >"$TMP/light" 2>&1
if grep -q 'libgsl' "$TMP/light" &&
    ! grep -Eq 'lib(mpi|open-rte|open-pal|plplot)' "$TMP/light"; then
    ok "lsefit loads neither libmpi nor libplplot"
else
    not_ok "lsefit loads neither libmpi nor libplplot"
    show "$TMP/light"
fi

# 2. lsefit-full loads them
if [ "$FULL" = none ]; then
    skip "lsefit-full loads MPI and PLplot" "built without MPI and PLplot"
else
    LD_TRACE_LOADED_OBJECTS=1 "$FULL" --version >"$TMP/full" 2>&1
    bad=0
    [ "$MPI" = 1 ] && ! grep -q 'libmpi' "$TMP/full" && bad=1
    [ "$PLOTS" = 1 ] && ! grep -q 'libplplot' "$TMP/full" && bad=1
    if [ $bad = 0 ] && "$FULL" --version | grep -q '^lsefit (lsegraph) '; then
        ok "lsefit-full loads MPI and PLplot"
    else
        not_ok "lsefit-full loads MPI and PLplot"
        show "$TMP/full"
    fi
fi

# 3. gmm plot through the light lsefit
if [ "$PLOTS" != 1 ]; then
    skip "lsefit gmm plot execs lsefit-full" "built without PLplot"
else
    if "$LSEFIT" -q gmm "$DATA/faithful.csv" -k 2 --seed 1 -o "$TMP/m.json" \
        >"$TMP/out" 2>&1 &&
        LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/ld" "$LSEFIT" gmm plot \
            "$TMP/m.json" "$DATA/faithful.csv" -o "$TMP/fig.svg" \
            >>"$TMP/out" 2>&1 &&
        grep -q '<svg' "$TMP/fig.svg" && cat "$TMP"/ld.* | grep -q libplplot; then
        ok "lsefit gmm plot execs lsefit-full"
    else
        not_ok "lsefit gmm plot execs lsefit-full"
        show "$TMP/out"
    fi
fi

# 4. no lsefit-full: today's messages (a copy in an empty directory; the
#    installed path is checked too, so skip when something is installed)
mkdir "$TMP/alone"
cp "$LSEFIT" "$TMP/alone/lsefit"
export LD_LIBRARY_PATH=$(dirname "$LIBLSE")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
installed=$(strings "$LSEFIT" | grep '/lsefit-full$' | head -n 1)
if [ "$FULL" = none ] || { [ -n "$installed" ] && [ -e "$installed" ]; }; then
    skip "without lsefit-full: built without PLplot" "nothing to hand over to, or installed"
    skip "without lsefit-full: built without MPI" "nothing to hand over to, or installed"
else
    missing PLplot "$TMP/fig2.svg" gmm plot "$TMP/m.json" \
        "$DATA/faithful.csv" -o "$TMP/fig2.svg"
    missing MPI "$TMP/m2.json" gmm "$DATA/faithful.csv" -k 2 --mpi \
        -o "$TMP/m2.json"
fi

# 5. the static link: no shared liblsegraph or libopenblas, and a fit whose
#    covariances GSL factors (its Cholesky above n = 4 calls cblas_dtrsm)
#    binds those calls to lsefit itself, not to GSL's reference gslcblas
if [ "$STATIC" != 1 ]; then
    skip "lsefit links liblsegraph and OpenBLAS statically" "-Dstatic_lsefit off or no libopenblas.a"
elif ! grep -Eq 'liblsegraph|libopenblas' "$TMP/light" &&
    LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/bind" "$LSEFIT" -q gmm \
        "$DATA/iris.csv" --ignore species -k 2 --seed 1 >"$TMP/out" 2>&1 &&
    grep -q "binding file .*libgsl.* to .*lsefit.*symbol .cblas_" "$TMP"/bind.* &&
    ! grep -q "binding file .*libgsl.* to .*libgslcblas.*symbol .cblas_" "$TMP"/bind.*; then
    ok "lsefit links liblsegraph and OpenBLAS statically"
else
    not_ok "lsefit links liblsegraph and OpenBLAS statically"
    show "$TMP/light"
    grep -h "cblas_" "$TMP"/bind.* 2>/dev/null | head -n 5
fi
exit $status
