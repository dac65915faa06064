#!/usr/bin/python3
"""Reference EM for the switching linear dynamical system, in plain NumPy:
the straightforward implementation lsegraph is compared with
(docs/performance.md).

    slds_numpy.py DIR mixture|markov [ITERS]

Model: x_t = A_k x_{t-1} + b_k + e_t, e_t ~ N(0, Sigma_k), the mode k drawn
independently with weights pi (mixture) or by a Markov chain with initial
p0 and transitions P (Markov). The log-likelihood is that of x_1..x_{T-1}
given x_0, exactly lsegraph's SLDS energy. One EM iteration:
  E-step: log N for every step and mode (vectorized); mixture: softmax
  responsibilities; Markov: scaled forward-backward (one Python loop over
  the steps in each direction) and expected transition counts;
  M-step: weighted least squares for [A_k b_k], residual covariances plus
  reg_covar = 1e-6 on the diagonal, weights or p0 and P.
Starts from lse_bench_gen's initialization and runs exactly ITERS
(default 20) iterations; the time per iteration is the loop's time / ITERS;
the log-likelihood is evaluated after the loop, at the final parameters.
With BENCH_CLOCK=cpu (as bench/bench_util.h) the loop is timed by the
process's CPU time (time.process_time) instead of the wall clock: on a
shared machine, with OPENBLAS_NUM_THREADS=1, the figure to compare with
lse_bench's CPU time.
"""
import math
import os
import sys
import time

import numpy as np

import benchio

REG_COVAR = 1e-6


def log_gauss(y, x, a, b, cov):
    """(n, K) log N(y_t; A_k x_t + b_k, Sigma_k)."""
    n, d = y.shape
    k = a.shape[0]
    out = np.empty((n, k))
    for q in range(k):
        r = y - x @ a[q].T - b[q]
        chol = np.linalg.cholesky(cov[q])
        z = r @ np.linalg.inv(chol).T
        out[:, q] = (-0.5 * np.einsum("ij,ij->i", z, z)
                     - np.log(np.diag(chol)).sum()
                     - 0.5 * d * math.log(2.0 * math.pi))
    return out


def estep_mixture(logn, weights):
    lp = logn + np.log(weights)
    m = lp.max(axis=1, keepdims=True)
    e = np.exp(lp - m)
    s = e.sum(axis=1, keepdims=True)
    resp = e / s
    return resp, float((np.log(s) + m).sum()), None, None


def estep_markov(logn, p0, trans):
    n, k = logn.shape
    m = logn.max(axis=1, keepdims=True)
    em = np.exp(logn - m)
    alpha = np.empty((n, k))
    c = np.empty(n)
    a = p0 * em[0]
    c[0] = a.sum()
    alpha[0] = a / c[0]
    for t in range(1, n):
        a = (alpha[t - 1] @ trans) * em[t]
        c[t] = a.sum()
        alpha[t] = a / c[t]
    beta = np.empty((n, k))
    beta[n - 1] = 1.0
    for t in range(n - 2, -1, -1):
        beta[t] = trans @ (em[t + 1] * beta[t + 1]) / c[t + 1]
    gamma = alpha * beta
    xi = trans * (alpha[:-1].T @ (em[1:] * beta[1:] / c[1:, None]))
    loglik = float(np.log(c).sum() + m.sum())
    return gamma, loglik, gamma[0], xi


def mstep(y, x, resp, k):
    n, d = y.shape
    z = np.hstack([x, np.ones((n, 1))])
    a = np.empty((k, d, d))
    b = np.empty((k, d))
    cov = np.empty((k, d, d))
    nk = resp.sum(axis=0)
    for q in range(k):
        zw = z * resp[:, q:q + 1]
        coef = np.linalg.solve(z.T @ zw, zw.T @ y)  # (d+1, d)
        a[q] = coef[:d].T
        b[q] = coef[d]
        r = y - z @ coef
        cov[q] = (r * resp[:, q:q + 1]).T @ r / nk[q] + REG_COVAR * np.eye(d)
    return a, b, cov, nk / n


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in ("mixture", "markov"):
        sys.exit(__doc__)
    directory, kind = sys.argv[1], sys.argv[2]
    iters = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    series = benchio.load(directory, "slds.bin")
    k = benchio.load(directory, "slds_A.bin").shape[0]
    d = series.shape[1]
    a = benchio.load(directory, "slds_A.bin").reshape(k, d, d)
    b = benchio.load(directory, "slds_b.bin")
    cov = benchio.load(directory, "slds_cov.bin").reshape(k, d, d)
    weights = benchio.load(directory, "slds_w.bin")[:, 0]
    trans = benchio.load(directory, "slds_P.bin")
    p0 = benchio.load(directory, "slds_p0.bin")[0]
    y, x = series[1:], series[:-1]
    markov = kind == "markov"

    def estep(a, b, cov):
        logn = log_gauss(y, x, a, b, cov)
        if markov:
            return estep_markov(logn, p0, trans)
        return estep_mixture(logn, weights)

    clock = (time.process_time if os.environ.get("BENCH_CLOCK") == "cpu"
             else time.perf_counter)
    t0 = clock()
    for _ in range(iters):
        resp, _, g0, xi = estep(a, b, cov)
        a, b, cov, weights = mstep(y, x, resp, k)
        if markov:
            p0 = g0 / g0.sum()
            trans = xi / xi.sum(axis=1, keepdims=True)
    seconds = clock() - t0
    _, loglik, _, _ = estep(a, b, cov)
    benchio.result(tool="numpy", case=f"slds-{kind}",
                   threads=benchio.threads(), iters=iters,
                   ms_per_iter=f"{1e3 * seconds / max(iters, 1):.3f}",
                   loglik=f"{loglik:.10e}",
                   rss_mib=f"{benchio.maxrss_mib():.1f}")


if __name__ == "__main__":
    main()
