#!/usr/bin/python3
"""Run-to-run spread of the segmentation accuracy on one data set of
bench/lslds_vs_ssm.py (docs/models/slds.md, "Versus ssm"): ssm's fit
(exactly as in that script) under several numpy seeds, and lsefit's under
several --seed values and --n-init 8; per run acc, acc_pm and acc_mm as
defined in lslds_vs_ssm.py.

usage: bench/lslds_ssm_spread.py LSEFIT [--configs 0,1,2,3]
                                 [--ssm-seeds 1,2,3] [--data-seed 0]

ssm as in lslds_vs_ssm.py (LSE_SSM_PATH); without it only lsefit's rows.
The configurations are indices into lslds_vs_ssm.py's list; --data-seed
chooses the data set as its --seeds does (0: the table's).
"""
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lslds_vs_ssm as vs  # noqa: E402

CONFIGS = [(2, 2, 4, 1000, 2), (3, 3, 10, 4000, 4), (4, 4, 20, 10000, 4),
           (2, 2, 8, 20000, 4)]


def opt(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def lsefit_runs(lsefit, K, D, train_csv, tmp, lens, z):
    """acc, acc_pm, acc_mm of lsefit's fit under several seeds / restarts."""
    out = []
    for label, extra in (("seed1", ["--seed", "1"]), ("seed2", ["--seed", "2"]),
                         ("seed3", ["--seed", "3"]),
                         ("n_init8", ["--seed", "1", "--n-init", "8"])):
        model = os.path.join(tmp, "m.json")
        vs.run([lsefit, "slds", train_csv, "--sequence", "seq", "-k", str(K),
                "--latent-dim", str(D), "--markov", "--max-iter", "50",
                "--threads", "1", "-q", "-o", model] + extra)
        zhat, zmm, xhat = vs.decode(lsefit, model, train_csv, D)
        zpm = vs.plugin_path(json.load(open(model)), xhat, lens)
        out.append(("lsefit", label, [vs.accuracy(z, a, K)
                                      for a in (zhat, zpm, zmm)]))
    return out


def ssm_runs(ssm, K, D, N, train, seeds, z):
    """acc (= acc_pm) and acc_mm of ssm's fit under several numpy seeds."""
    w = ssm.SLDS(N, K, D, emissions="gaussian")  # numba warm-up
    w.initialize([train[0][:200]])
    w.fit([train[0][:200]], method="laplace_em",
          variational_posterior="structured_meanfield", num_iters=1,
          initialize=False)
    out = []
    for seed in seeds:
        m = ssm.SLDS(N, K, D, emissions="gaussian")
        np.random.seed(seed)
        m.initialize(train)
        _, q = m.fit(train, method="laplace_em",
                     variational_posterior="structured_meanfield",
                     num_iters=50, initialize=False)
        xs = q.mean_continuous_states
        zhat = np.concatenate([m.most_likely_states(x, y)
                               for x, y in zip(xs, train)])
        zmm = np.concatenate([Ez.argmax(1) for Ez in q.mean_discrete_states])
        a = vs.accuracy(z, zhat, K)
        out.append(("ssm", "seed%d" % seed, [a, a, vs.accuracy(z, zmm, K)]))
    return out


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    lsefit = os.path.abspath(args[0])
    configs = [int(c) for c in opt(args, "--configs", "0,1,2,3").split(",")]
    seeds = [int(s) for s in opt(args, "--ssm-seeds", "1,2,3").split(",")]
    dseed = int(opt(args, "--data-seed", "0"))
    ssm = vs.ssm_import()
    print("config,program,run,acc,acc_pm,acc_mm")
    for ci in configs:
        K, D, N, T, S = CONFIGS[ci]
        rng = np.random.default_rng(100 + ci + 1000 * dseed)
        m = vs.random_model(K, D, N, rng)
        train = [vs.simulate(m, T // S, rng) for _ in range(S)]
        z = np.concatenate([t[0] for t in train])
        lens = [len(t[0]) for t in train]
        name = "K%d_D%d_N%d_T%d_S%d" % (K, D, N, T, S)
        with tempfile.TemporaryDirectory() as tmp:
            train_csv = os.path.join(tmp, "train.csv")
            vs.write_csv(train_csv, [t[2] for t in train])
            rows = lsefit_runs(lsefit, K, D, train_csv, tmp, lens, z)
            t0 = time.process_time()
            if ssm is not None:
                rows += ssm_runs(ssm, K, D, N, [t[2] for t in train], seeds, z)
            for prog, label, a in rows:
                print("%s,%s,%s,%.4f,%.4f,%.4f" % (name, prog, label, *a),
                      flush=True)
            if ssm is not None:
                print("# %s: ssm %.1f CPU s" % (name, time.process_time() - t0))


if __name__ == "__main__":
    main()
