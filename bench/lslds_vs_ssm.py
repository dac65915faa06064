#!/usr/bin/python3
"""Latent SLDS: lsefit slds --latent-dim against ssm's SLDS (Laplace-EM,
structured mean field) on simulated data (docs/models/slds.md, "Versus
ssm").

usage: bench/lslds_vs_ssm.py LSEFIT [--quick] [--iters N] [--seeds S]
                             [--out FILE.csv]

For each configuration (K modes, latent dimension D, N observed columns,
T training rows in S sequences; fixed seeds) the script draws a random
Markov-switching SLDS with stable rotations, simulates a training set and
a held-out set (S sequences of T / (4 S) rows), fits both programs with the
same iteration budget from their own initializations, and reports per
program:

  acc     segmentation accuracy of the most likely mode path on the
          training rows, under the best permutation of the mode labels
          (lsefit: Viterbi of q(z), i.e. on its expected log-likelihoods,
          the "viterbi" column of lsefit slds segment; ssm: its
          most_likely_states, Viterbi on the dynamics' log-likelihoods at
          the posterior mean of x, its documented decoding)
  acc_pm  the same for one rule on both sides, ssm's: Viterbi on the
          dynamics' log-likelihoods log N(m_t; A_k m_(t-1) + b_k, Q_k) at
          the posterior means m_t and the fitted parameters (for ssm this
          is acc; for lsefit it is computed here from its model file and
          the means of lsefit slds segment)
  acc_mm  the same for the per-row most probable mode of each program's
          own q(z) (lsefit: the "mode" column; ssm: the argmax of its
          E_q[z_t]), the decoding that maximizes the expected accuracy
          under q(z); labels permuted separately from acc
  r2      R^2 of the true latent states against the smoothed latent means
          after the best affine map (least squares, all dimensions)
  elbo    the final ELBO per row (ssm: its Laplace-EM sample estimate)
  heldout log p(y) per row of the held-out set at the fitted parameters,
          by lsefit's importance sampler (lsefit slds score, 1000 samples;
          ssm's parameters are written as an lsefit model file: its
          per-mode initial state N(mu_init[k], Sigmas_init[k]) becomes the
          pi0-weighted moment-matched Gaussian, which touches one row per
          sequence). The generating parameters' value is the row "truth",
          whose acc, acc_mm and r2 are lsefit's inference (lsefit slds
          segment) at the generating parameters: what the structured
          mean field decodes when the parameters are right.
  ms_iter seconds per EM iteration (ssm: after a small warm-up fit, so
          numba's compilation is excluded) and us/step/iter.
  cpu_s   CPU seconds of the whole fit (lsefit: the child process's user +
          system time; ssm: this process's), which a loaded machine
          inflates far less than the wall-clock seconds; cpu_us_step_iter
          the same per row and iteration.

--seeds S repeats every configuration on S data sets (seed s draws the
model and the data from numpy's default_rng(100 + configuration + 1000 s);
s = 0 is the default run) and ends with the paired differences lsefit -
ssm per configuration, in rows, of acc, acc_pm and acc_mm (mean, standard
deviation, wins / ties / losses), as comment lines.

ssm is not in Debian. To run its side, get the sources of
github:lindermanlab/ssm and github:HIPS/autograd, build ssm's Cython
extension in place (`python3 setup.py build_ext --inplace` in ssm's
directory; Debian's cython3, python3-numpy, python3-scipy and python3-numba
suffice) and put both directories on LSE_SSM_PATH (colon-separated). ssm
imports tqdm only for progress bars: when it is missing this script
provides a stand-in in a temporary directory. Without ssm the script
prints only lsefit's rows (and says so).
"""
import csv
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np


def random_model(K, D, N, rng):
    """A Markov SLDS with stable rotations, distinct per mode."""
    A, b, Q = [], [], []
    for k in range(K):
        M = np.linalg.qr(rng.standard_normal((D, D)))[0]
        ang = rng.uniform(0.05, 0.5, size=(D + 1) // 2)
        R = np.zeros((D, D))
        for i, a in enumerate(ang):
            j = 2 * i
            if j + 1 < D:
                R[j:j + 2, j:j + 2] = [[np.cos(a), -np.sin(a)],
                                       [np.sin(a), np.cos(a)]]
            else:
                R[j, j] = 1.0
        A.append(rng.uniform(0.95, 0.99) * M @ R @ M.T)
        b.append(0.1 * rng.standard_normal(D))
        Q.append(0.02 * np.eye(D))
    P = np.full((K, K), 0.03 / max(K - 1, 1))
    np.fill_diagonal(P, 0.97)
    if K == 1:
        P[:] = 1.0
    return dict(A=np.array(A), b=np.array(b), Q=np.array(Q),
                C=rng.standard_normal((N, D)), d=rng.standard_normal(N),
                r=np.full(N, 0.1), m0=np.zeros(D), P0=np.eye(D),
                pi0=np.full(K, 1.0 / K), P=P)


def simulate(m, T, rng):
    K, D = m["b"].shape
    N = m["d"].shape[0]
    z = np.zeros(T, int)
    x = np.zeros((T, D))
    y = np.zeros((T, N))
    for t in range(T):
        z[t] = rng.choice(K, p=m["pi0"] if t == 0 else m["P"][z[t - 1]])
        if t == 0:
            x[t] = rng.multivariate_normal(m["m0"], m["P0"])
        else:
            k = z[t]
            x[t] = rng.multivariate_normal(m["A"][k] @ x[t - 1] + m["b"][k],
                                           m["Q"][k])
        y[t] = m["C"] @ x[t] + m["d"] + np.sqrt(m["r"]) * rng.standard_normal(N)
    return z, x, y


def write_csv(path, seqs):
    N = seqs[0].shape[1]
    with open(path, "w") as f:
        f.write("seq," + ",".join("y%d" % i for i in range(N)) + "\n")
        for s, y in enumerate(seqs):
            for row in y:
                f.write("%d,%s\n" % (s, ",".join("%.17g" % v for v in row)))


def model_json(m, N):
    K, D = m["b"].shape
    return {"model": "slds-latent", "markov": True, "n_modes": K,
            "latent_dim": D, "n_features": N,
            "feature_names": ["y%d" % i for i in range(N)],
            "A": m["A"].tolist(), "b": m["b"].tolist(), "Q": m["Q"].tolist(),
            "C": m["C"].tolist(), "d": m["d"].tolist(),
            "R_diag": m["r"].tolist(), "initial_mean": m["m0"].tolist(),
            "initial_cov": m["P0"].tolist(), "initial": m["pi0"].tolist(),
            "transition": m["P"].tolist()}


def accuracy(z, zhat, K):
    best = 0.0
    for perm in itertools.permutations(range(K)):
        best = max(best, float(np.mean(np.array(perm)[zhat] == z)))
    return best


def r2(x, xhat):
    X = np.hstack([xhat, np.ones((len(xhat), 1))])
    W = np.linalg.lstsq(X, x, rcond=None)[0]
    res = x - X @ W
    return 1.0 - (res ** 2).sum() / ((x - x.mean(0)) ** 2).sum()


def viterbi(logpi, logP, ll):
    """The most likely state path of an HMM with log emissions ll (T, K)."""
    T, K = ll.shape
    delta = logpi + ll[0]
    back = np.zeros((T, K), dtype=int)
    for t in range(1, T):
        c = delta[:, None] + logP
        back[t] = c.argmax(0)
        delta = c.max(0) + ll[t]
    path = np.zeros(T, dtype=int)
    path[-1] = int(delta.argmax())
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path


def plugin_path(doc, xhat, lens):
    """ssm's most_likely_states rule on a model file: Viterbi per sequence
    on log N(x_t; A_k x_(t-1) + b_k, Q_k) at the means xhat (0 at the
    first row, whose initial-state term is the same for every mode)."""
    A, b, Q = (np.array(doc[k]) for k in ("A", "b", "Q"))
    logpi = np.log(np.array(doc["initial"]))
    logP = np.log(np.array(doc["transition"]))
    out, o = [], 0
    for n in lens:
        x = xhat[o:o + n]
        o += n
        ll = np.zeros((n, len(A)))
        for k in range(len(A)):
            res = x[1:] - x[:-1] @ A[k].T - b[k]
            ll[1:, k] = -0.5 * (np.einsum("ti,ij,tj->t", res,
                                          np.linalg.inv(Q[k]), res) +
                                np.linalg.slogdet(Q[k])[1])
        out.append(viterbi(logpi, logP, ll))
    return np.concatenate(out)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()))
    return p.stdout


def score(lsefit, model, test_csv):
    out = run([lsefit, "slds", "score", model, test_csv, "--sequence", "seq",
               "--samples", "1000", "--seed", "1"])
    row = out.strip().split("\n")[1].split(",")
    return float(row[5])  # loglik_per_row


def lsefit_side(lsefit, K, D, train_csv, test_csv, iters, tmp, lens):
    model = os.path.join(tmp, "lse.json")
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run([lsefit, "slds", train_csv, "--sequence", "seq", "-k", str(K),
         "--latent-dim", str(D), "--markov", "--max-iter", str(iters),
         "--seed", "1", "--threads", "1", "-q", "-o", model])
    secs = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    doc = json.load(open(model))
    zhat, zmm, xhat = decode(lsefit, model, train_csv, D)
    return dict(zhat=zhat, zpm=plugin_path(doc, xhat, lens), zmm=zmm,
                xhat=xhat, elbo=doc["elbo"],
                iters=doc["n_iter"], secs=secs, cpu=cpu,
                heldout=score(lsefit, model, test_csv))


def decode(lsefit, model, train_csv, D):
    """lsefit slds segment: the Viterbi path, the per-row most probable
    mode and the smoothed latent means."""
    seg = list(csv.DictReader(io_text(run([lsefit, "slds", "segment", model,
                                           train_csv, "--sequence", "seq"]))))
    zhat = np.array([int(r["viterbi"]) for r in seg])
    zmm = np.array([int(r["mode"]) for r in seg])
    xhat = np.array([[float(r["x%d" % i]) for i in range(D)] for r in seg])
    return zhat, zmm, xhat


def io_text(s):
    return s.splitlines()


def ssm_import():
    path = os.environ.get("LSE_SSM_PATH")
    if not path:
        return None
    sys.path[:0] = path.split(":")
    try:
        import tqdm  # noqa: F401
    except ImportError:
        shim = tempfile.mkdtemp(prefix="tqdm-shim-")
        os.makedirs(os.path.join(shim, "tqdm"))
        with open(os.path.join(shim, "tqdm", "__init__.py"), "w") as f:
            f.write("class _Bar:\n"
                    "    def __init__(self, it): self.it = it\n"
                    "    def __iter__(self): return iter(self.it)\n"
                    "    def set_description(self, *a, **k): pass\n"
                    "    def update(self, *a, **k): pass\n"
                    "    def close(self): pass\n"
                    "def tqdm(it=None, *a, **k): return _Bar(it or [])\n"
                    "def trange(*a, **k): return _Bar(range(*a))\n")
        with open(os.path.join(shim, "tqdm", "auto.py"), "w") as f:
            f.write("from . import tqdm, trange\n")
        sys.path.insert(0, shim)
    try:
        import ssm
        return ssm
    except ImportError as e:
        print("# ssm not importable from LSE_SSM_PATH: %s" % e)
        return None


def ssm_side(ssm, lsefit, K, D, N, train, test_csv, iters, tmp):
    # warm-up: numba compiles its message passing on first use
    w = ssm.SLDS(N, K, D, emissions="gaussian")
    w.initialize([train[0][:200]])
    w.fit([train[0][:200]], method="laplace_em",
          variational_posterior="structured_meanfield", num_iters=1,
          initialize=False)
    m = ssm.SLDS(N, K, D, emissions="gaussian")
    np.random.seed(1)
    c0 = time.process_time()
    t0 = time.perf_counter()
    m.initialize(train)
    elbos, q = m.fit(train, method="laplace_em",
                     variational_posterior="structured_meanfield",
                     num_iters=iters, initialize=False)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    xs = q.mean_continuous_states
    zhat = np.concatenate([m.most_likely_states(x, y)
                           for x, y in zip(xs, train)])
    dyn, em = m.dynamics, m.emissions
    pi0 = np.exp(m.init_state_distn.log_pi0)
    pi0 /= pi0.sum()
    mu = (pi0[:, None] * dyn.mu_init).sum(0)
    P0 = sum(p * (S + np.outer(u - mu, u - mu))
             for p, u, S in zip(pi0, dyn.mu_init, dyn.Sigmas_init))
    Ps = np.exp(m.transitions.log_Ps)
    Ps /= Ps.sum(1, keepdims=True)
    fitted = dict(A=dyn.As, b=dyn.bs, Q=dyn.Sigmas, C=em.Cs[0], d=em.ds[0],
                  r=np.exp(em.inv_etas[0]), m0=mu, P0=P0, pi0=pi0, P=Ps)
    path = os.path.join(tmp, "ssm.json")
    json.dump(model_json(fitted, N), open(path, "w"))
    zmm = np.concatenate([Ez.argmax(1) for Ez in q.mean_discrete_states])
    return dict(zhat=zhat, zpm=zhat, zmm=zmm, xhat=np.concatenate(xs),
                elbo=float(elbos[-1]),
                iters=iters, secs=secs, cpu=cpu,
                heldout=score(lsefit, path, test_csv))


def paired_summary(diffs):
    """Comment lines: per configuration, lsefit - ssm in rows over the
    seeds, of acc, acc_pm and acc_mm."""
    out = []
    for name, d in diffs.items():
        if not d:
            continue
        a = np.array(d, dtype=float)
        parts = []
        for j, col in enumerate(("acc", "acc_pm", "acc_mm")):
            v = a[:, j]
            parts.append("%s mean %+.1f sd %.1f wins/ties/losses %d/%d/%d" % (
                col, v.mean(), v.std(ddof=1) if len(v) > 1 else 0.0,
                (v > 0).sum(), (v == 0).sum(), (v < 0).sum()))
        out.append("# paired lsefit - ssm, rows, %s over %d seeds: %s" % (
            name, len(a), "; ".join(parts)))
    return out


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    lsefit = os.path.abspath(args[0])
    quick = "--quick" in args
    iters = int(args[args.index("--iters") + 1]) if "--iters" in args else 50
    seeds = int(args[args.index("--seeds") + 1]) if "--seeds" in args else 1
    out = args[args.index("--out") + 1] if "--out" in args else None
    # (K, D, N, T, S)
    configs = [(2, 2, 4, 1000, 2)] if quick else [
        (2, 2, 4, 1000, 2), (3, 3, 10, 4000, 4), (4, 4, 20, 10000, 4),
        (2, 2, 8, 20000, 4)]
    ssm = ssm_import()
    if ssm is None:
        print("# ssm: not run (set LSE_SSM_PATH, see the header)")
    rows = []
    diffs = {}
    header = ("config,seed,program,acc,acc_pm,acc_mm,r2,elbo_per_row,heldout_per_row,"
              "iters,s_per_iter,us_per_step_iter,cpu_s,cpu_us_per_step_iter")
    print(header)
    for seed in range(seeds):
        for ci, (K, D, N, T, S) in enumerate(configs):
            name = "K%d_D%d_N%d_T%d_S%d" % (K, D, N, T, S)
            rows.extend(run_config(lsefit, ssm, ci, seed, K, D, N, T, S,
                                   iters, diffs.setdefault(name, [])))
    summary = paired_summary(diffs) if ssm is not None else []
    for line in summary:
        print(line)
    if out:
        with open(out, "w") as f:
            f.write(header + "\n" + "\n".join(rows + summary) + "\n")


def run_config(lsefit, ssm, ci, seed, K, D, N, T, S, iters, diffs):
    """One configuration and data seed: the truth row and one row per
    program (printed and returned); (acc, acc_pm, acc_mm) of lsefit - ssm
    in rows appended to diffs."""
    rows = []
    rng = np.random.default_rng(100 + ci + 1000 * seed)
    m = random_model(K, D, N, rng)
    train = [simulate(m, T // S, rng) for _ in range(S)]
    test = [simulate(m, max(T // (4 * S), 100), rng) for _ in range(S)]
    z = np.concatenate([t[0] for t in train])
    x = np.concatenate([t[1] for t in train])
    ys = [t[2] for t in train]
    name = "K%d_D%d_N%d_T%d_S%d,%d" % (K, D, N, T, S, seed)
    with tempfile.TemporaryDirectory() as tmp:
        train_csv = os.path.join(tmp, "train.csv")
        test_csv = os.path.join(tmp, "test.csv")
        write_csv(train_csv, ys)
        write_csv(test_csv, [t[2] for t in test])
        truth = os.path.join(tmp, "truth.json")
        json.dump(model_json(m, N), open(truth, "w"))
        zt, zmt, xt = decode(lsefit, truth, train_csv, D)
        lens = [len(t[0]) for t in train]
        zpt = plugin_path(model_json(m, N), xt, lens)
        rows.append("%s,truth,%.4f,%.4f,%.4f,%.4f,,%.4f,,,,," % (
            name, accuracy(z, zt, K), accuracy(z, zpt, K), accuracy(z, zmt, K),
            r2(x, xt), score(lsefit, truth, test_csv)))
        print(rows[-1], flush=True)
        sides = [("lsefit", lambda: lsefit_side(lsefit, K, D, train_csv,
                                                test_csv, iters, tmp,
                                                lens))]
        if ssm is not None:
            sides.append(("ssm", lambda: ssm_side(ssm, lsefit, K, D, N, ys,
                                                  test_csv, iters, tmp)))
        accs = {}
        for prog, fn in sides:
            try:
                r = fn()
            except Exception as e:  # report and go on
                print("# %s %s failed: %s" % (name, prog, e), flush=True)
                continue
            per = r["secs"] / max(r["iters"], 1)
            cper = r["cpu"] / max(r["iters"], 1)
            accs[prog] = [accuracy(z, r[c], K) for c in ("zhat", "zpm", "zmm")]
            rows.append("%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d,%.4g,%.3g,%.4g,"
                        "%.3g" % (
                name, prog, *accs[prog], r2(x, r["xhat"]),
                r["elbo"] / T, r["heldout"], r["iters"], per, per / T * 1e6,
                r["cpu"], cper / T * 1e6))
            print(rows[-1], flush=True)
        if len(accs) == 2:
            diffs.append([round((accs["lsefit"][j] - accs["ssm"][j]) * T)
                          for j in range(3)])
    return rows


if __name__ == "__main__":
    main()
