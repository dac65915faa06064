#!/usr/bin/python3
"""K = 1 latent SLDS against a NumPy Kalman filter and RTS smoother
(docs/models/slds.md, "Latent states: the real SLDS").

usage: test_lslds_numpy.py LSEFIT

A one-mode model (D = 2, N = 3) is a linear-Gaussian state-space model:
`lsefit slds score` must report its exact log-likelihood as the ELBO and
`lsefit slds segment --variances` its smoothed means and variances, to
1e-9, with two sequences and missing entries. The reference is the
textbook covariance-form filter written here in NumPy (independent of
the library's information-form smoother). Skipped (TAP 1..0 # SKIP) without NumPy.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("1..0 # SKIP numpy missing")  # TAP: a skipped test
    sys.exit(0)


def kalman(y, obs, starts, A, b, Q, C, d, r, m0, P0):
    """Filter + RTS smoother; returns log-likelihood, means, variances."""
    T, D = y.shape[0], A.shape[0]
    fm, fP, pm, pP = [], [], [], []
    ll = 0.0
    for t in range(T):
        if t in starts:
            m, P = m0.copy(), P0.copy()
        else:
            m, P = A @ fm[-1] + b, A @ fP[-1] @ A.T + Q
        pm.append(m)
        pP.append(P)
        o = obs[t]
        if o.any():
            Co, e = C[o], y[t, o] - d[o] - C[o] @ m
            S = Co @ P @ Co.T + np.diag(r[o])
            ll += -0.5 * (o.sum() * np.log(2 * np.pi) +
                          np.linalg.slogdet(S)[1] + e @ np.linalg.solve(S, e))
            K = P @ Co.T @ np.linalg.inv(S)
            m, P = m + K @ e, (np.eye(D) - K @ Co) @ P
        fm.append(m)
        fP.append(P)
    sm, sP = list(fm), list(fP)
    for t in range(T - 2, -1, -1):
        if t + 1 in starts:
            continue
        G = fP[t] @ A.T @ np.linalg.inv(pP[t + 1])
        sm[t] = fm[t] + G @ (sm[t + 1] - pm[t + 1])
        sP[t] = fP[t] + G @ (sP[t + 1] - pP[t + 1]) @ G.T
    return ll, np.array(sm), np.array([np.diag(P) for P in sP])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lsefit = sys.argv[1]
    rng = np.random.default_rng(7)
    D, N, T = 2, 3, 80
    A = np.array([[0.9, -0.2], [0.15, 0.85]])
    b = np.array([0.1, -0.05])
    Q = np.array([[0.2, 0.05], [0.05, 0.3]])
    C = rng.standard_normal((N, D))
    d = rng.standard_normal(N)
    r = np.array([0.3, 0.5, 0.2])
    m0, P0 = np.array([0.2, -0.1]), np.array([[1.0, 0.3], [0.3, 0.8]])
    seq = np.array([0] * 35 + [1] * (T - 35))
    starts = {0, 35}
    x = np.zeros((T, D))
    for t in range(T):
        x[t] = (rng.multivariate_normal(m0, P0) if t in starts else
                rng.multivariate_normal(A @ x[t - 1] + b, Q))
    y = x @ C.T + d + np.sqrt(r) * rng.standard_normal((T, N))
    obs = np.ones((T, N), bool)
    obs[5, 1] = obs[12, :] = obs[40, 0] = obs[41, 2] = obs[60, :2] = False
    ll, sm, sv = kalman(y, obs, starts, A, b, Q, C, d, r, m0, P0)
    model = {"model": "slds-latent", "markov": True, "n_modes": 1,
             "latent_dim": D, "n_features": N,
             "feature_names": ["y%d" % i for i in range(N)],
             "A": [A.tolist()], "b": [b.tolist()], "Q": [Q.tolist()],
             "C": C.tolist(), "d": d.tolist(), "R_diag": r.tolist(),
             "initial_mean": m0.tolist(), "initial_cov": P0.tolist(),
             "initial": [1.0], "transition": [[1.0]]}
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        mp, dp = os.path.join(tmp, "m.json"), os.path.join(tmp, "y.csv")
        json.dump(model, open(mp, "w"))
        with open(dp, "w") as f:
            f.write("seq,y0,y1,y2\n")
            for t in range(T):
                f.write("%d,%s\n" % (seq[t], ",".join(
                    "%.17g" % y[t, i] if obs[t, i] else "" for i in range(N))))
        common = ["--sequence", "seq", "--missing", "marginalize"]
        sc = subprocess.run([lsefit, "slds", "score", mp, dp, "--samples", "2"]
                            + common, capture_output=True, text=True,
                            check=True).stdout
        row = list(csv.DictReader(sc.splitlines()))[0]
        elbo = float(row["elbo"])
        ok = abs(elbo - ll) <= 1e-9 * abs(ll)
        fails += not ok
        print("%s 1 - ELBO %.15g = Kalman log-likelihood %.15g" % (
            "ok" if ok else "not ok", elbo, ll))
        sg = subprocess.run([lsefit, "slds", "segment", mp, dp, "--variances"]
                            + common, capture_output=True, text=True,
                            check=True).stdout
        rows = list(csv.DictReader(sg.splitlines()))
        xm = np.array([[float(q["x%d" % i]) for i in range(D)] for q in rows])
        xv = np.array([[float(q["v%d" % i]) for i in range(D)] for q in rows])
        dm, dv = np.abs(xm - sm).max(), np.abs(xv - sv).max()
        ok = dm <= 1e-9 and dv <= 1e-9
        fails += not ok
        print("%s 2 - smoothed means within %.2g, variances within %.2g"
              % ("ok" if ok else "not ok", dm, dv))
    print("1..2")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
