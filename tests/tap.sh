# TAP helpers of the shell tests (sourced): ok, not_ok, skip and show
# (the first lines of a file as TAP comments); $status is 1 after a
# not_ok, the exit status of the test.
n=0
status=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
    n=$((n + 1))
    echo "not ok $n - $1"
    status=1
}
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
show() { sed 's/^/# /' "$1" | head -n "${2:-30}"; }
