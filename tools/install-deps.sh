#!/usr/bin/env bash
# Install what lsegraph needs on Debian/Ubuntu (run as root or with sudo).
# Only missing packages are installed; safe to run again. libplplot-dev and
# plplot-driver-cairo: heat maps and fit plots (meson feature "plots").
set -eu
pkgs="meson ninja-build pkg-config gcc libgsl-dev check libjansson-dev
libcsv-dev libopenblas-dev libgraphviz-dev graphviz
libplplot-dev plplot-driver-cairo libpng-dev"
[ "${LSE_WITH_MPI:-0}" = 1 ] && pkgs="$pkgs libopenmpi-dev openmpi-bin python3"
[ "${LSE_WITH_VALGRIND:-0}" = 1 ] && pkgs="$pkgs valgrind"
pkgs="$pkgs python3-numpy" # tests/test_lslds_numpy.py (K = 1 latent SLDS vs NumPy Kalman)
# the tests against independent implementations (CI sets it; without them
# those tests are skipped): statsmodels (tests/test_lslds_lags_statsmodels.py)
# and scikit-learn (tests/test_gmm_diag_sklearn.py)
[ "${LSE_WITH_PEERS:-0}" = 1 ] && pkgs="$pkgs python3-statsmodels python3-sklearn"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq $missing
