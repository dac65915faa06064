#!/usr/bin/python3
"""scikit-learn's GaussianMixture on a benchmark data set, from the
initialization every tool shares (docs/performance.md).

    sklearn_gmm.py DIR TAG full|diag [ITERS]

means_init, precisions_init (inverse of the initial covariances) and
weights_init come from lse_bench_gen's files; tol = 0 and max_iter = ITERS
(default 20) make exactly ITERS EM iterations. reg_covar is 1e-6 for full
and 0 for diag covariances, as in lse_bench and vlfeat_gmm. scikit-learn
cannot run 0 iterations, so the time per iteration is
(median t(ITERS) - median t(1)) / (ITERS - 1) over BENCH_REPS fits (default 5): validation,
init_params and the final E-step of fit() cancel. The log-likelihood is
score(X) * N at the parameters after ITERS iterations. Threads: the
OMP_NUM_THREADS / OPENBLAS_NUM_THREADS environment that run.sh sets.
"""
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

import benchio


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    directory, tag, cov = sys.argv[1], sys.argv[2], sys.argv[3]
    iters = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    if cov not in ("full", "diag"):
        sys.exit("covariance must be full or diag")
    x = benchio.load(directory, f"gmm_{tag}.bin")
    means = benchio.load(directory, f"gmm_{tag}_means.bin")
    weights = benchio.load(directory, f"gmm_{tag}_w.bin")[:, 0]
    k, d = means.shape
    if cov == "full":
        c = benchio.load(directory, f"gmm_{tag}_cov.bin").reshape(k, d, d)
        precisions = np.linalg.inv(c)
        reg = 1e-6
    else:
        precisions = 1.0 / benchio.load(directory, f"gmm_{tag}_var.bin")
        reg = 0.0
    warnings.simplefilter("ignore", ConvergenceWarning)

    def fit(n_iter):
        gm = GaussianMixture(n_components=k, covariance_type=cov, tol=0.0,
                             reg_covar=reg, max_iter=n_iter, n_init=1,
                             init_params="random_from_data", random_state=0,
                             weights_init=weights, means_init=means,
                             precisions_init=precisions)
        t0 = time.perf_counter()
        gm.fit(x)
        return gm, time.perf_counter() - t0

    times1, times = [], []
    gm = None
    for _ in range(benchio.reps()):
        _, t1 = fit(1)
        times1.append(t1)
        gm, t = fit(iters)
        times.append(t)
    best1, best = benchio.median(times1), benchio.median(times)
    loglik = gm.score(x) * x.shape[0]
    benchio.result(tool="sklearn", case=f"gmm-{tag}-{cov}",
                   threads=benchio.threads(), iters=gm.n_iter_,
                   ms_per_iter=f"{1e3 * (best - best1) / (iters - 1):.3f}",
                   loglik=f"{loglik:.10e}",
                   rss_mib=f"{benchio.maxrss_mib():.1f}")


if __name__ == "__main__":
    main()
