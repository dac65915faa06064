#!/bin/sh
# The library's AVX2 code has no masked store (vmaskmovpd / vpmaskmovq
# with a memory destination): AMD's Zen 2 and 3 run one as microcode, many
# times a plain store (docs/performance.md, "Session 15"). Masked loads
# and AVX-512's masked stores are fine. Skipped without objdump.
#   test_no_masked_store.sh LIBRARY
. "$(dirname "$0")/tap.sh"
lib=$1
if ! command -v objdump >/dev/null 2>&1; then
    skip "no masked store in $lib" "objdump not found"
    echo "1..$n"
    exit 0
fi
found=$(mktemp)
trap 'rm -f "$found"' EXIT
# AT&T order: the destination is last, so a store ends in a memory operand
objdump -d --no-show-raw-insn "$lib" |
    awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 }
         /v(p)?maskmov[pq][ds]?[ \t]/ && /\)$/ { print fn, $0 }' >"$found"
if [ -s "$found" ]; then
    not_ok "no masked store in $lib"
    show "$found"
else
    ok "no masked store in $lib"
fi
echo "1..$n"
exit $status
