#!/usr/bin/python3
"""K = 1 latent SLDS with two and three lags against statsmodels'
KalmanSmoother (docs/models/slds.md, "Several lags").

usage: test_lslds_lags_statsmodels.py LSEFIT

A one-mode model with L lags is a linear-Gaussian state-space model on the
stacked state s_t = [x_t; ...; x_{t-L+1}] with process noise in the first
block only. statsmodels runs it with time-varying matrices: at a sequence
start the state is [x_s; 0; ...] with covariance blockdiag(P0, 0, ...);
the next L - 1 transitions draw a fresh x ~ N(m0, P0) (the model's head
rows) and shift; after them the transition is [A_1 ... A_L; I 0] with
intercept [b; 0] and noise Q. `lsefit slds score` must report its
log-likelihood as the ELBO and `lsefit slds segment --variances` its
smoothed means and variances, to 1e-9, with two sequences and missing
entries. Skipped (TAP 1..0 # SKIP) without statsmodels.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from statsmodels.tsa.statespace.kalman_smoother import KalmanSmoother
except ImportError:
    print("1..0 # SKIP statsmodels missing")  # TAP: a skipped test
    sys.exit(0)


def sm_sequence(y, Al, b, Q, C, d, r, m0, P0):
    """log-likelihood, smoothed means and variances of x for one sequence"""
    T, N = y.shape
    D, L = Q.shape[0], len(Al)
    S = L * D
    ks = KalmanSmoother(k_endog=N, k_states=S, k_posdef=D)
    ks.bind(np.asarray(y, float))
    Z = np.zeros((N, S))
    Z[:, :D] = C
    ks["design"] = Z
    ks["obs_intercept"] = d
    ks["obs_cov"] = np.diag(r)
    sel = np.zeros((S, D))
    sel[:D, :] = np.eye(D)
    ks["selection"] = sel
    # matrices at index t move the state from row t to row t + 1
    Tm = np.zeros((S, S, T))
    c = np.zeros((S, T))
    Qt = np.zeros((D, D, T))
    for t in range(T):
        Tm[D:, :S - D, t] = np.eye(S - D)
        if t + 1 < L:          # row t + 1 is a head row: a fresh draw
            c[:D, t] = m0
            Qt[:, :, t] = P0
        else:
            Tm[:D, :, t] = np.hstack(Al)
            c[:D, t] = b
            Qt[:, :, t] = Q
    ks["transition"] = Tm
    ks["state_intercept"] = c
    ks["state_cov"] = Qt
    a0 = np.zeros(S)
    a0[:D] = m0
    Pa = np.zeros((S, S))
    Pa[:D, :D] = P0
    ks.initialize_known(a0, Pa)
    res = ks.smooth()
    mean = res.smoothed_state[:D].T
    var = np.array([np.diag(res.smoothed_state_cov[:D, :D, t])
                    for t in range(T)])
    return float(np.sum(res.llf_obs)), mean, var


def check(lsefit, L, tmp, rng):
    D, N, T, T1 = 2, 3, 90, 40
    rot = np.array([[0.8, -0.25], [0.2, 0.75]])
    Al = [rot] + [(-0.2 if l % 2 else 0.1) * np.eye(D) for l in range(1, L)]
    b = np.array([0.1, -0.05])
    Q = np.array([[0.2, 0.05], [0.05, 0.3]])
    C = rng.standard_normal((N, D))
    d = rng.standard_normal(N)
    r = np.array([0.3, 0.5, 0.2])
    m0, P0 = np.array([0.2, -0.1]), np.array([[1.0, 0.3], [0.3, 0.8]])
    seq = np.array([0] * T1 + [1] * (T - T1))
    x = np.zeros((T, D))
    for t in range(T):
        s = 0 if t < T1 else T1
        if t - s < L:
            x[t] = rng.multivariate_normal(m0, P0)
        else:
            mu = b + sum(Al[l] @ x[t - 1 - l] for l in range(L))
            x[t] = rng.multivariate_normal(mu, Q)
    y = x @ C.T + d + np.sqrt(r) * rng.standard_normal((T, N))
    y[5, 1] = y[12, :] = y[41, 0] = y[42, 2] = y[60, :2] = np.nan
    ll, means, vars_ = 0.0, [], []
    for lo, hi in ((0, T1), (T1, T)):
        a, m, v = sm_sequence(y[lo:hi], Al, b, Q, C, d, r, m0, P0)
        ll += a
        means.append(m)
        vars_.append(v)
    sm, sv = np.vstack(means), np.vstack(vars_)
    model = {"model": "slds-latent", "markov": True, "n_modes": 1,
             "latent_dim": D, "lags": L, "n_features": N,
             "feature_names": ["y%d" % i for i in range(N)],
             "A": [np.hstack(Al).tolist()], "b": [b.tolist()],
             "Q": [Q.tolist()], "C": C.tolist(), "d": d.tolist(),
             "R_diag": r.tolist(), "initial_mean": m0.tolist(),
             "initial_cov": P0.tolist(), "initial": [1.0],
             "transition": [[1.0]]}
    mp, dp = os.path.join(tmp, "m%d.json" % L), os.path.join(tmp, "y%d.csv" % L)
    json.dump(model, open(mp, "w"))
    with open(dp, "w") as f:
        f.write("seq,y0,y1,y2\n")
        for t in range(T):
            f.write("%d,%s\n" % (seq[t], ",".join(
                "" if np.isnan(y[t, i]) else "%.17g" % y[t, i]
                for i in range(N))))
    common = ["--sequence", "seq", "--missing", "marginalize"]
    sc = subprocess.run([lsefit, "slds", "score", mp, dp, "--samples", "2"]
                        + common, capture_output=True, text=True,
                        check=True).stdout
    elbo = float(list(csv.DictReader(sc.splitlines()))[0]["elbo"])
    sg = subprocess.run([lsefit, "slds", "segment", mp, dp, "--variances"]
                        + common, capture_output=True, text=True,
                        check=True).stdout
    rows = list(csv.DictReader(sg.splitlines()))
    xm = np.array([[float(q["x%d" % i]) for i in range(D)] for q in rows])
    xv = np.array([[float(q["v%d" % i]) for i in range(D)] for q in rows])
    return elbo, ll, np.abs(xm - sm).max(), np.abs(xv - sv).max()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(11)
    fails, n = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for L in (2, 3):
            elbo, ll, dm, dv = check(sys.argv[1], L, tmp, rng)
            ok = abs(elbo - ll) <= 1e-9 * abs(ll)
            n += 1
            fails += not ok
            print("%s %d - L = %d: ELBO %.15g = statsmodels log-likelihood "
                  "%.15g" % ("ok" if ok else "not ok", n, L, elbo, ll))
            ok = dm <= 1e-9 and dv <= 1e-9
            n += 1
            fails += not ok
            print("%s %d - L = %d: smoothed means within %.2g, variances "
                  "within %.2g" % ("ok" if ok else "not ok", n, L, dm, dv))
    print("1..%d" % n)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
