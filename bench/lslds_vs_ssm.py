#!/usr/bin/python3
"""Latent SLDS: lsefit slds --latent-dim against ssm's SLDS (Laplace-EM,
structured mean field) on simulated data (docs/models/slds.md, "Versus
ssm").

usage: bench/lslds_vs_ssm.py LSEFIT [--quick] [--iters N] [--seeds S]
                             [--first-seed S0] [--configs I,J,..]
                             [--cache DIR [--ssm-only]] [--out FILE.csv]

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
          under q(z) when every transition is possible; labels permuted
          separately from acc
  acc_path  lsefit's default segmentation, the "path" column of lsefit
          slds segment: the path of nonzero probability that maximizes
          the expected number of rows labelled right under q(z) (the
          maximum-expected-accuracy path, models/lslds_decode.c; the mode
          column when every transition is possible); ssm has no such
          path, its row repeats acc
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

--seeds S repeats every configuration on the data seeds S0 .. S - 1 (seed
s draws the model and the data from numpy's default_rng(100 +
configuration + 1000 s); s = 0 is the default run; --configs picks
configurations by index) and ends with comment lines of the paired
differences lsefit - ssm per configuration and over all data sets:
wins / ties / losses, the exact two-sided sign test, and the mean,
standard error and median of the accuracy differences in rows per 1000,
of each rule on both sides (acc, acc_pm, acc_mm) and of each of lsefit's
decodings against ssm's own path (acc); the last line is the verdict of
the criterion fixed before the comparison was run: lsefit's default
segmentation (acc_path) is at least ssm's most_likely_states (acc) when
it wins at least as many data sets as it loses.

--cache DIR keeps each ssm fit (its paths, posterior means, fitted
parameters, ELBO and times) in DIR and reuses it when present, so a
re-run after a change to lsefit refits only lsefit; the times are those
of the run that fitted it. --ssm-only only fills the cache (no lsefit
run; several such processes over disjoint seeds can run side by side).

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
import math
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
    r = decode(lsefit, model, train_csv, D)
    r.update(zpm=plugin_path(doc, r["xhat"], lens), elbo=doc["elbo"],
             iters=doc["n_iter"], secs=secs, cpu=cpu,
             heldout=score(lsefit, model, test_csv))
    return r


def decode(lsefit, model, train_csv, D):
    """lsefit slds segment: the Viterbi path of q(z), the per-row most
    probable mode, the default path (maximum expected accuracy) and the
    smoothed latent means."""
    seg = list(csv.DictReader(io_text(run([lsefit, "slds", "segment", model,
                                           train_csv, "--sequence", "seq"]))))
    return dict(zhat=np.array([int(r["viterbi"]) for r in seg]),
                zmm=np.array([int(r["mode"]) for r in seg]),
                zpath=np.array([int(r["path"]) for r in seg]),
                xhat=np.array([[float(r["x%d" % i]) for i in range(D)]
                               for r in seg]))


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


def ssm_fit(ssm, K, D, N, train, iters):
    """ssm's fit and decoding (no lsefit involved): its most_likely_states
    path, the argmax of its E_q[z_t], the posterior means, the fitted
    parameters as an lsefit model document, the ELBO and the times."""
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
    zmm = np.concatenate([Ez.argmax(1) for Ez in q.mean_discrete_states])
    return dict(zhat=zhat, zmm=zmm, xhat=np.concatenate(xs),
                doc=model_json(fitted, N), elbo=float(elbos[-1]),
                iters=iters, secs=secs, cpu=cpu)


def ssm_cached(ssm, cache, key, K, D, N, train, iters):
    """ssm_fit, or its stored result: with --cache DIR each fit is kept in
    DIR/KEY.npz (paths, means, times) and DIR/KEY.json (the fitted
    parameters), so that a re-run (e.g. after a change to lsefit's
    decoding) does not refit ssm; the times are those of the run that
    fitted it."""
    if cache:
        f = os.path.join(cache, key + ".npz")
        if os.path.exists(f):
            z = np.load(f)
            r = {k: z[k] for k in ("zhat", "zmm", "xhat")}
            r.update({k: float(z[k]) for k in ("elbo", "secs", "cpu")})
            r["iters"] = int(z["iters"])
            r["doc"] = json.load(open(os.path.join(cache, key + ".json")))
            return r
    if ssm is None:
        return None
    r = ssm_fit(ssm, K, D, N, train, iters)
    if cache:
        os.makedirs(cache, exist_ok=True)
        json.dump(r["doc"], open(os.path.join(cache, key + ".json"), "w"))
        np.savez(os.path.join(cache, key + ".npz"), zhat=r["zhat"],
                 zmm=r["zmm"], xhat=r["xhat"], elbo=r["elbo"],
                 secs=r["secs"], cpu=r["cpu"], iters=r["iters"])
    return r


def ssm_side(ssm, cache, key, lsefit, K, D, N, train, test_csv, iters, tmp):
    r = ssm_cached(ssm, cache, key, K, D, N, train, iters)
    if r is None:
        raise RuntimeError("ssm not importable and no cached fit")
    path = os.path.join(tmp, "ssm.json")
    json.dump(r["doc"], open(path, "w"))
    r["zpm"] = r["zhat"]
    r["zpath"] = r["zhat"]  # ssm has no such path: its own (acc)
    r["heldout"] = score(lsefit, path, test_csv)
    return r


# lsefit's decodings, compared with ssm's (acc, acc_pm, acc_mm: the same
# rule on both sides; acc_path: ssm has no such path, its acc is used)
PAIRED = (("zhat", "acc"), ("zpm", "acc_pm"), ("zmm", "acc_mm"),
          ("zpath", "acc_path"))


def sign_p(wins, losses):
    """Exact two-sided sign test of wins against losses (ties dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
    return min(1.0, 2.0 * tail / 2.0 ** n)


def stats_line(label, rows_diff, T):
    """wins/ties/losses, the sign test, and the mean, standard error and
    median of the accuracy differences (fractions of the rows, so every
    data set weighs the same), in rows per 1000."""
    d = np.asarray(rows_diff, dtype=float)
    a = 1000.0 * d / np.asarray(T, dtype=float)
    w, t, l = int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum())
    se = a.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else 0.0
    return ("%s: wins/ties/losses %d/%d/%d, sign test p %.3g, per 1000 rows "
            "mean %+.2f se %.2f median %+.2f" % (label, w, t, l, sign_p(w, l),
                                                 a.mean(), se, np.median(a)))


def paired_summary(diffs):
    """Comment lines: per configuration and over all data sets, lsefit -
    ssm in rows: each decoding rule on both sides (acc, acc_pm, acc_mm),
    then each of lsefit's decodings against ssm's own path (acc), and the
    verdict of the criterion fixed in advance (docs/models/slds.md):
    lsefit's default segmentation, the maximum-expected-accuracy path
    (acc_path), is at least ssm's most_likely_states (acc) when it wins
    at least as many data sets as it loses."""
    out = []
    everything = []
    np_ = len(PAIRED)
    for name, d in list(diffs.items()) + [("all", None)]:
        if d is None:
            d = everything
        elif d:
            everything.extend(d)
        if not d:
            continue
        a = np.array(d, dtype=float)
        T = a[:, 2 * np_]
        for j, (_, col) in enumerate(PAIRED[:3]):
            out.append("# paired lsefit - ssm, %s, %d data sets, %s on both "
                       "sides: %s" % (name, len(a), col,
                                      stats_line(col, a[:, j], T)))
        for j, (_, col) in enumerate(PAIRED):
            out.append("# paired lsefit - ssm, %s, %d data sets, lsefit's %s "
                       "against ssm's acc: %s" % (
                           name, len(a), col,
                           stats_line(col, a[:, np_ + j], T)))
    if everything:
        a = np.array(everything, dtype=float)[:, np_ + 3]
        w, l = int((a > 0).sum()), int((a < 0).sum())
        out.append("# criterion (lsefit's default path at least ssm's "
                   "most_likely_states: wins >= losses over the %d data "
                   "sets): %d wins, %d losses: %s" % (
                       len(a), w, l, "met" if w >= l else "not met"))
    return out


def option(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    lsefit = os.path.abspath(args[0])
    quick = "--quick" in args
    iters = int(option(args, "--iters", 50))
    seeds = int(option(args, "--seeds", 1))
    out = option(args, "--out", None)
    cache = option(args, "--cache", None)
    # (K, D, N, T, S)
    configs = [(2, 2, 4, 1000, 2)] if quick else [
        (2, 2, 4, 1000, 2), (3, 3, 10, 4000, 4), (4, 4, 20, 10000, 4),
        (2, 2, 8, 20000, 4)]
    picked = option(args, "--configs", None)
    chosen = [int(c) for c in picked.split(",")] if picked else \
        range(len(configs))
    first = int(option(args, "--first-seed", 0))
    ssm = ssm_import()
    if "--ssm-only" in args:  # fill the cache: ssm's fits, no lsefit
        if ssm is None or cache is None:
            sys.exit("--ssm-only needs LSE_SSM_PATH and --cache DIR")
        for seed in range(first, seeds):
            for ci in chosen:
                data = draw(ci, seed, *configs[ci])
                key = "%s_%d" % (cfg_name(*configs[ci]), seed)
                r = ssm_cached(ssm, cache, key, *configs[ci][:3], data[3],
                               iters)
                print("# cached %s: cpu %.3g s" % (key, r["cpu"]), flush=True)
        return
    if ssm is None:
        print("# ssm: not run (set LSE_SSM_PATH, see the header)")
    rows = []
    diffs = {}
    header = ("config,seed,program,acc,acc_pm,acc_mm,acc_path,r2,"
              "elbo_per_row,heldout_per_row,iters,s_per_iter,"
              "us_per_step_iter,cpu_s,cpu_us_per_step_iter")
    print(header)
    for seed in range(first, seeds):
        for ci in chosen:
            K, D, N, T, S = configs[ci]
            rows.extend(run_config(lsefit, ssm, cache, ci, seed, K, D, N, T,
                                   S, iters,
                                   diffs.setdefault(cfg_name(K, D, N, T, S),
                                                    [])))
    summary = paired_summary(diffs) if ssm is not None or cache else []
    for line in summary:
        print(line)
    if out:
        with open(out, "w") as f:
            f.write(header + "\n" + "\n".join(rows + summary) + "\n")


def cfg_name(K, D, N, T, S):
    return "K%d_D%d_N%d_T%d_S%d" % (K, D, N, T, S)


def draw(ci, seed, K, D, N, T, S):
    """The generating model, training and held-out sets of configuration
    ci and data seed seed: (model, training, held-out, training y's)."""
    rng = np.random.default_rng(100 + ci + 1000 * seed)
    m = random_model(K, D, N, rng)
    train = [simulate(m, T // S, rng) for _ in range(S)]
    test = [simulate(m, max(T // (4 * S), 100), rng) for _ in range(S)]
    return m, train, test, [t[2] for t in train]


def run_config(lsefit, ssm, cache, ci, seed, K, D, N, T, S, iters, diffs):
    """One configuration and data seed: the truth row and one row per
    program (printed and returned); the paired differences lsefit - ssm
    in rows appended to diffs (PAIRED's columns)."""
    rows = []
    m, train, test, ys = draw(ci, seed, K, D, N, T, S)
    z = np.concatenate([t[0] for t in train])
    x = np.concatenate([t[1] for t in train])
    key = "%s_%d" % (cfg_name(K, D, N, T, S), seed)
    name = "%s,%d" % (cfg_name(K, D, N, T, S), seed)
    with tempfile.TemporaryDirectory() as tmp:
        train_csv = os.path.join(tmp, "train.csv")
        test_csv = os.path.join(tmp, "test.csv")
        write_csv(train_csv, ys)
        write_csv(test_csv, [t[2] for t in test])
        truth = os.path.join(tmp, "truth.json")
        json.dump(model_json(m, N), open(truth, "w"))
        lens = [len(t[0]) for t in train]
        dt = decode(lsefit, truth, train_csv, D)
        zpt = plugin_path(model_json(m, N), dt["xhat"], lens)
        rows.append("%s,truth,%.4f,%.4f,%.4f,%.4f,%.4f,,%.4f,,,,," % (
            name, accuracy(z, dt["zhat"], K), accuracy(z, zpt, K),
            accuracy(z, dt["zmm"], K), accuracy(z, dt["zpath"], K),
            r2(x, dt["xhat"]), score(lsefit, truth, test_csv)))
        print(rows[-1], flush=True)
        sides = [("lsefit", lambda: lsefit_side(lsefit, K, D, train_csv,
                                                test_csv, iters, tmp,
                                                lens))]
        if ssm is not None or cache:
            sides.append(("ssm", lambda: ssm_side(ssm, cache, key, lsefit, K,
                                                  D, N, ys, test_csv, iters,
                                                  tmp)))
        accs = {}
        for prog, fn in sides:
            try:
                r = fn()
            except Exception as e:  # report and go on
                print("# %s %s failed: %s" % (name, prog, e), flush=True)
                continue
            per = r["secs"] / max(r["iters"], 1)
            cper = r["cpu"] / max(r["iters"], 1)
            accs[prog] = {c: accuracy(z, r[c], K)
                          for c, _ in PAIRED}
            rows.append("%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d,%.4g,"
                        "%.3g,%.4g,%.3g" % (
                name, prog, *accs[prog].values(), r2(x, r["xhat"]),
                r["elbo"] / T, r["heldout"], r["iters"], per, per / T * 1e6,
                r["cpu"], cper / T * 1e6))
            print(rows[-1], flush=True)
        if len(accs) == 2:
            a, b = accs["lsefit"], accs["ssm"]
            diffs.append([round((a[c] - b[c]) * T) for c, _ in PAIRED] +
                         [round((a[c] - b["zhat"]) * T) for c, _ in PAIRED] +
                         [T])
    return rows


if __name__ == "__main__":
    main()
