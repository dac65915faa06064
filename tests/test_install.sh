#!/usr/bin/env bash
# Installing lsegraph (README "Install"), TAP output for meson:
#   test_install.sh MESON BUILD_DIR PREFIX BINDIR LIBDIR CBLAS SANITIZE STATIC CC...
# 1. `meson install --destdir` into a temporary directory: a prefix that is
#    no system directory.
# 2. The installed lsefit and energyviz start with no LD_LIBRARY_PATH and
#    load liblsegraph (and liblsegraph-viz) from that prefix: their rpath is
#    relative to the program ($ORIGIN/../lib...); so does lsefit-full
#    (when built), and the installed lsefit hands `gmm plot` to it.
# 3. The installed lsegraph.pc and lsegraph-viz.pc put on a user's link
#    line exactly the CBLAS the library was built with (CBLAS: openblas or
#    gslcblas), never GSL's reference gslcblas next to OpenBLAS: a program
#    linked with -Wl,--no-as-needed (Fedora's default) from their flags
#    binds every cblas_dgemm to lib$CBLAS (LD_DEBUG=bindings).
# SANITIZE is meson's b_sanitize: the user program is built with the same
# runtime as the library. STATIC is 1 when lsefit links liblsegraph
# statically (meson.build, static_lsefit): then it loads no liblsegraph.
set -u
if [ $# -lt 9 ]; then
    echo "usage: test_install.sh MESON BUILD_DIR PREFIX BINDIR LIBDIR CBLAS SANITIZE STATIC CC..." >&2
    exit 2
fi
MESON=$1 BUILD=$2 PREFIX=$3 BINDIR=$4 LIBDIR=$5 CBLAS=$6 SANITIZE=$7 STATIC=$8
shift 8
CC=("$@")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lsegraph_install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
D=$TMP/dest
under() { case $1 in /*) echo "$D$1" ;; *) echo "$D$PREFIX/$1" ;; esac; }
BIN=$(under "$BINDIR")
LIB=$(under "$LIBDIR")

. "$(dirname "$0")/tap.sh"

echo "1..8"
if DESTDIR=$D "$MESON" install -C "$BUILD" --no-rebuild --quiet \
    >"$TMP/install.log" 2>&1 && [ -x "$BIN/lsefit" ]; then
    ok "meson install --destdir"
else
    not_ok "meson install --destdir"
    show "$TMP/install.log" 40
    exit 1
fi

# 2. the installed programs start from the prefix alone
run_installed() { # NAME VERSION-PREFIX [NAME IN --version]
    local exe=$BIN/$1
    if ! env -u LD_LIBRARY_PATH "$exe" --version >"$TMP/out" 2>"$TMP/err" ||
        ! grep -q "^${3:-$1} (lsegraph) " "$TMP/out"; then
        not_ok "installed $1 --version runs without LD_LIBRARY_PATH"
        show "$TMP/err" 40
        return
    fi
    # ...and loads the libraries of this prefix, not copies elsewhere
    env -u LD_LIBRARY_PATH LD_TRACE_LOADED_OBJECTS=1 "$exe" >"$TMP/ldd" 2>&1
    local bad=0
    for lib in $2; do
        if ! grep -q "$lib.* => $BIN/.*$lib" "$TMP/ldd" &&
            ! grep -q "$lib.* => $LIB/$lib" "$TMP/ldd"; then
            bad=1
        fi
    done
    if [ $bad = 0 ]; then
        ok "installed $1 --version runs without LD_LIBRARY_PATH"
    else
        not_ok "installed $1 loads its libraries from the prefix"
        show "$TMP/ldd" 40
    fi
}
if [ "$STATIC" = 1 ]; then # runs, and loads no liblsegraph at all
    if env -u LD_LIBRARY_PATH "$BIN/lsefit" --version 2>&1 |
        grep -q "^lsefit (lsegraph) " &&
        env -u LD_LIBRARY_PATH LD_TRACE_LOADED_OBJECTS=1 "$BIN/lsefit" \
            >"$TMP/ldd" 2>&1 && ! grep -q liblsegraph "$TMP/ldd"; then
        ok "installed lsefit (static liblsegraph) runs without LD_LIBRARY_PATH"
    else
        not_ok "installed lsefit (static liblsegraph) runs without LD_LIBRARY_PATH"
        show "$TMP/ldd" 40
    fi
else
    run_installed lsefit "liblsegraph.so.0"
fi
# lsefit-full (MPI, PLplot): the light lsefit execs it for `gmm plot`, so
# the help of the installed `lsefit gmm plot` is lsefit-full's, and the
# dynamic loader starts two programs (the exec keeps argv[0], so LD_DEBUG
# names both "lsefit")
if [ -x "$BIN/lsefit-full" ]; then
    run_installed lsefit-full "liblsegraph.so.0" lsefit
    env -u LD_LIBRARY_PATH "$BIN/lsefit-full" gmm plot --help >"$TMP/full" 2>&1
    env -u LD_LIBRARY_PATH LD_DEBUG=libs LD_DEBUG_OUTPUT="$TMP/ld" \
        "$BIN/lsefit" gmm plot --help >"$TMP/light" 2>&1
    if cmp -s "$TMP/full" "$TMP/light" &&
        [ "$(cat "$TMP"/ld.* | grep -c 'initialize program:')" = 2 ]; then
        ok "installed lsefit hands gmm plot to lsefit-full"
    else
        not_ok "installed lsefit hands gmm plot to lsefit-full"
        show "$TMP/light" 40
    fi
else
    skip "installed lsefit-full runs" "built without MPI and PLplot"
    skip "installed lsefit hands gmm plot to lsefit-full" "no lsefit-full"
fi
if [ -x "$BIN/energyviz" ]; then
    run_installed energyviz "liblsegraph-viz.so.0 liblsegraph.so.0"
else
    skip "installed energyviz runs" "built without energyviz"
fi

# 3. pkg-config: the .pc files as installed, their prefix moved to $D
mkdir -p "$TMP/pc"
for pc in "$LIB"/pkgconfig/*.pc; do
    sed "s|^prefix=.*|prefix=$D$PREFIX|" "$pc" >"$TMP/pc/$(basename "$pc")"
done
export PKG_CONFIG_PATH=$TMP/pc
flags=$(pkg-config --cflags --libs lsegraph 2>"$TMP/err")
other=gslcblas
[ "$CBLAS" = gslcblas ] && other=openblas
if [ -n "$flags" ] && echo " $flags " | grep -q -- "-l$CBLAS " &&
    ! echo " $flags " | grep -q -- "-l$other "; then
    ok "pkg-config --libs lsegraph links -l$CBLAS, not -l$other"
else
    not_ok "pkg-config --libs lsegraph links -l$CBLAS, not -l$other"
    echo "# flags: $flags"
    show "$TMP/err" 40
fi

cat >"$TMP/prog.c" <<'PROG'
#include <stdio.h>
#include <gsl/gsl_blas.h>
#include <lsegraph/lsegraph.h>
int main(void)
{
    gsl_matrix *a = gsl_matrix_alloc(2, 2), *c = gsl_matrix_alloc(2, 2);
    gsl_matrix_set_identity(a);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, a, a, 0.0, c);
    printf("%g %s\n", gsl_matrix_get(c, 1, 1), lse_strerror(LSE_OK));
    gsl_matrix_free(a);
    gsl_matrix_free(c);
    return 0;
}
PROG
san=()
[ "$SANITIZE" != none ] && san=(-fsanitize="$SANITIZE")
bind_check() { # PACKAGE
    local flags
    flags=$(pkg-config --cflags --libs "$1")
    # shellcheck disable=SC2086
    if ! "${CC[@]}" "${san[@]}" -o "$TMP/prog" "$TMP/prog.c" \
        -Wl,--no-as-needed $flags -Wl,-rpath,"$LIB" >"$TMP/cc.log" 2>&1; then
        not_ok "a program linked with pkg-config $1 and --no-as-needed"
        show "$TMP/cc.log" 40
        return
    fi
    env -u LD_LIBRARY_PATH LD_BIND_NOW=1 LD_DEBUG=bindings \
        LD_DEBUG_OUTPUT="$TMP/bind" "$TMP/prog" >"$TMP/out" 2>"$TMP/err"
    cat "$TMP"/bind.* 2>/dev/null | grep "symbol \`cblas_dgemm'" >"$TMP/dgemm"
    rm -f "$TMP"/bind.*
    if [ -s "$TMP/dgemm" ] && ! grep -v " to [^ ]*/lib$CBLAS\.so" "$TMP/dgemm" |
        grep -q .; then
        ok "pkg-config $1 with --no-as-needed: cblas_dgemm binds to lib$CBLAS"
    else
        not_ok "pkg-config $1 with --no-as-needed: cblas_dgemm binds to lib$CBLAS"
        echo "# flags: $flags"
        show "$TMP/dgemm" 40
        show "$TMP/err" 40
    fi
}
bind_check lsegraph
if [ -f "$TMP/pc/lsegraph-viz.pc" ]; then
    bind_check lsegraph-viz
else
    skip "pkg-config lsegraph-viz" "built without energyviz"
fi
exit $status
