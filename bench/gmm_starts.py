#!/usr/bin/python3
"""Which start should `lsefit gmm` use by default? (docs/lsefit.md,
"Starts"). On the bundled Faithful and Iris (columns 1-4), for K = 1..8 and
the four covariance types, the best log-likelihood each method reaches and
its wall time:

  lsefit gmm DATA -k 1:8 --covariance C --init M   for each start M
  scikit-learn GaussianMixture (defaults: k-means start, tol 1e-3), n_init
  1 and 10 (skipped without sklearn)
  mclust's Mclust (default: hcVVV start), models VVV/VVI/VII/EEE = full,
  diag, spherical, tied (skipped without R and mclust)

    bench/gmm_starts.py BUILD_DIR [--starts kmeans++,kmeans,hcvvv,emem,emem+hc]

Every tool runs on one thread (LSE_NUM_THREADS, OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS are set to 1 here): mclust is single-threaded, and on
data this small threads only add synchronization (on a loaded 2-core
machine lsefit's default thread count made these fits 40x slower).

"best known" is the largest log-likelihood any method reached; a method
"reaches" it within 0.01 (lsefit and scikit-learn add reg_covar 1e-6 to the
covariances, mclust nothing). Prints a Markdown table: per method, the
(K, covariance) cells below the best known (and by how much at most), and
the total wall time of the 2 x 4 runs of K = 1..8. The machine may be
shared: wall times are of one run.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

for _v in ("LSE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = {"faithful": ("data/faithful.csv", []),
        "iris": ("data/iris.csv", ["--ignore", "species"])}
COVS = ["full", "diag", "spherical", "tied"]
MCLUST = {"full": "VVV", "diag": "VVI", "spherical": "VII", "tied": "EEE"}
KMAX = 8
TOL = 0.01


def run_lsefit(lsefit, path, extra, cov, init):
    cmd = [lsefit, "gmm", path, "-k", "1:%d" % KMAX, "--covariance", cov,
           "--init", init, "-q"] + extra
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True,
                         text=True).stdout
    secs = time.perf_counter() - t0
    ll = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\d+\s+(\S+)\s", line)
        if m:
            ll[int(m.group(1))] = float(m.group(2))
    return ll, secs


def run_sklearn(x, cov, n_init):
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture
    ll = {}
    t0 = time.perf_counter()
    for k in range(1, KMAX + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            g = GaussianMixture(k, covariance_type=cov, n_init=n_init,
                                random_state=0).fit(x)
        ll[k] = g.score(x) * x.shape[0]
    return ll, time.perf_counter() - t0


R_SCRIPT = r"""
suppressPackageStartupMessages(library(mclust))
a <- commandArgs(TRUE)
X <- read.csv(a[1])
if (a[2] == "iris") X <- X[, 1:4]
X <- as.matrix(X)
t0 <- proc.time()[["elapsed"]]
b <- mclustBIC(X, G = 1:%d, modelNames = a[3], verbose = FALSE)
secs <- proc.time()[["elapsed"]] - t0
for (k in 1:%d) {
  f <- tryCatch(summary(b, X, G = k, modelNames = a[3]), error = function(e) NULL)
  cat(k, if (is.null(f)) NA else sprintf("%%.10g", f$loglik), "\n")
}
cat("secs", secs, "\n")
""" % (KMAX, KMAX)


def run_mclust(path, name, model, script):
    out = subprocess.run(["Rscript", script, path, name, model], check=True,
                         capture_output=True, text=True).stdout
    ll, secs = {}, 0.0
    for line in out.splitlines():
        f = line.split()
        if f[0] == "secs":
            secs = float(f[1])
        elif f[1] != "NA":
            ll[int(f[0])] = float(f[1])
    return ll, secs


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lsefit = os.path.join(sys.argv[1], "tools", "lsefit")
    starts = "kmeans++,kmeans,hcvvv,emem,emem+hc".split(",")
    if len(sys.argv) > 3 and sys.argv[2] == "--starts":
        starts = sys.argv[3].split(",")
    methods = ["lsefit --init " + s for s in starts]
    res = {}  # method -> (set, cov) -> ({k: ll}, secs)
    for s in starts:
        res["lsefit --init " + s] = {
            (n, c): run_lsefit(lsefit, os.path.join(ROOT, p), e, c, s)
            for n, (p, e) in SETS.items() for c in COVS}
    try:
        import numpy as np
        data = {"faithful": np.loadtxt(os.path.join(ROOT, SETS["faithful"][0]),
                                       delimiter=",", skiprows=1),
                "iris": np.loadtxt(os.path.join(ROOT, SETS["iris"][0]),
                                   delimiter=",", skiprows=1,
                                   usecols=(0, 1, 2, 3))}
        for ni in (1, 10):
            key = "scikit-learn n_init=%d" % ni
            methods.append(key)
            res[key] = {(n, c): run_sklearn(data[n], c, ni)
                        for n in SETS for c in COVS}
    except ImportError:
        print("(scikit-learn missing: skipped)")
    have_r = shutil.which("Rscript") is not None and subprocess.run(
        ["Rscript", "-e", "library(mclust)"], capture_output=True
    ).returncode == 0
    if have_r:
        with tempfile.NamedTemporaryFile("w", suffix=".R",
                                         delete=False) as f:
            f.write(R_SCRIPT)
        key = "mclust default (hcVVV)"
        methods.append(key)
        res[key] = {(n, c): run_mclust(os.path.join(ROOT, p), n, MCLUST[c],
                                       f.name)
                    for n, (p, e) in SETS.items() for c in COVS}
        os.unlink(f.name)
    else:
        print("(R or mclust missing: skipped)")
    best = {}
    for m in methods:
        for key, (ll, _) in res[m].items():
            for k, v in ll.items():
                best[key + (k,)] = max(best.get(key + (k,), -1e300), v)
    print("| method | cells below the best known (of 64) | largest gap | "
          "wall time (s) |")
    print("|---|---|---|---|")
    for m in methods:
        below, gap, secs = [], 0.0, 0.0
        for key, (ll, t) in res[m].items():
            secs += t
            for k in range(1, KMAX + 1):
                b = best[key + (k,)]
                v = ll.get(k, float("-inf"))
                if v < b - TOL:
                    below.append("%s %s K=%d" % (key[0], key[1], k))
                    gap = max(gap, b - v)
        print("| %s | %d | %.3g | %.1f |" % (m, len(below), gap, secs))
    print()
    print("Best known log-likelihoods:")
    for n in SETS:
        for c in COVS:
            print("  %s %s: %s" % (n, c, " ".join(
                "%.3f" % best[(n, c, k)] for k in range(1, KMAX + 1))))
    print()
    for m in methods:
        cells = []
        for key, (ll, t) in res[m].items():
            for k in range(1, KMAX + 1):
                if ll.get(k, float("-inf")) < best[key + (k,)] - TOL:
                    cells.append("%s/%s/K%d" % (key[0][:4], key[1][:4], k))
        print("%s: below at %s" % (m, ", ".join(cells) if cells else "none"))


if __name__ == "__main__":
    main()
