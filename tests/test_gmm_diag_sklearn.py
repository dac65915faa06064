#!/usr/bin/python3
"""Diagonal GMM fits against scikit-learn on the bundled data
(docs/performance.md, "Diagonal covariances, session 10").

usage: test_gmm_diag_sklearn.py LSEFIT DATA_DIR

From a start that lsefit writes (2 EM iterations from k-means++),
`lsefit gmm --init-file START --accel none --tol 0` and
scikit-learn's GaussianMixture (means_init, precisions_init, weights_init
from the same file, tol 0) run the same number of plain EM iterations;
their log-likelihoods (lsefit's "loglik", score(X) times N) must agree to
1e-10 relative. K of at most and more than 16 (the fused pass's two
softmaxes), d from 2 to 64, with and without the fused pass
(LSE_NO_FUSED: the separate steps). Skipped (TAP 1..0 # SKIP) without scikit-learn.
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

try:
    import numpy as np
    from sklearn.mixture import GaussianMixture
except ImportError:
    print("1..0 # SKIP scikit-learn missing")  # TAP: a skipped test
    sys.exit(0)

# data file, column to ignore (or None), copies of its rows stacked, K, EM
# iterations, reg_covar. The fused pass of lib/sim/gauss_diag_fused.c runs
# where lsefit does not keep the responsibilities (N K > 65536) and the
# quadratic path is accurate (every mean within 100 standard deviations of
# the mean of the means: digits with reg_covar 1): digits with K = 40 (the
# softmax of K > 16), three copies of digits with K = 16 and 8 (that of
# K <= 16). The others take the separate steps.
CASES = [
    ("digits.csv", "label", 1, 40, 10, 1.0),
    ("digits.csv", "label", 3, 16, 10, 1.0),
    ("digits.csv", "label", 3, 8, 15, 1.0),
    ("digits.csv", "label", 1, 10, 20, 1e-3),
    ("iris.csv", "species", 1, 3, 30, 1e-6),
    ("faithful.csv", None, 1, 4, 30, 1e-6),
]


def load(path, ignore):
    with open(path) as f:
        names = f.readline().strip().split(",")
    keep = [i for i, n in enumerate(names) if n != ignore]
    return np.loadtxt(path, delimiter=",", skiprows=1, usecols=keep)


def lsefit(exe, args, env=None):
    r = subprocess.run([exe] + args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"lsefit {' '.join(args)}: {r.stderr.strip()}")


def stacked(data_dir, tmp, name, copies):
    """the file, or one with `copies` copies of its rows"""
    path = os.path.join(data_dir, name)
    if copies == 1:
        return path
    out = os.path.join(tmp, f"{copies}x{name}")
    with open(path) as f:
        head, rows = f.readline(), f.read()
    if not rows.endswith("\n"):
        rows += "\n"
    with open(out, "w") as f:
        f.write(head + rows * copies)
    return out


def case(exe, data_dir, tmp, n, spec, fused):
    name, ignore, copies, k, iters, reg = spec
    path = stacked(data_dir, tmp, name, copies)
    common = [path, "--covariance", "diag", "--reg-covar", repr(reg), "-q"]
    if ignore is not None:
        common += ["--ignore", ignore]
    start = os.path.join(tmp, f"start{n}.json")
    end = os.path.join(tmp, f"end{n}.json")
    env = dict(os.environ)
    if not fused:
        env["LSE_NO_FUSED"] = "1"
    lsefit(exe, ["gmm"] + common + ["-k", str(k), "--max-iter", "2",
                                    "--n-init", "1", "--init", "kmeans++",
                                    "--seed", "1", "-o", start], env)
    lsefit(exe, ["gmm"] + common + ["--init-file", start, "--max-iter",
                                    str(iters), "--tol", "0", "--accel",
                                    "none", "-o", end], env)
    with open(start) as f:
        s = json.load(f)
    with open(end) as f:
        e = json.load(f)
    x = load(path, ignore)
    gm = GaussianMixture(len(s["weights"]), covariance_type="diag", tol=0.0,
                         max_iter=e["n_iter"], reg_covar=reg,
                         weights_init=np.array(s["weights"]),
                         means_init=np.array(s["means"]),
                         precisions_init=1.0 / np.array(s["covariances"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm.fit(x)
    ref = gm.score(x) * len(x)
    rel = abs(e["loglik"] - ref) / abs(ref)
    ok = e["n_iter"] == iters and rel <= 1e-10
    return ok, (f"{copies}x {name} K={k} "
                f"{'fused' if fused else 'LSE_NO_FUSED'}: "
                f"lsefit {e['loglik']!r} scikit-learn {ref!r} rel {rel:.2e}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    exe, data_dir = sys.argv[1], sys.argv[2]
    runs = [(spec, fused) for spec in CASES for fused in (True, False)]
    print(f"1..{len(runs)}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, (spec, fused) in enumerate(runs, 1):
            ok, msg = case(exe, data_dir, tmp, n, spec, fused)
            print(f"{'ok' if ok else 'not ok'} {n} - {msg}")
            failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
