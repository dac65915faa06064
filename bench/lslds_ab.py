#!/usr/bin/python3
"""Latent SLDS: two lsefit builds (before/after a change) interleaved on the
simulated data sets of bench/lslds_vs_ssm.py (docs/models/slds.md, "Versus
ssm").

usage: bench/lslds_ab.py LSEFIT_A LSEFIT_B [--reps R] [--iters N] [--quick]

For each configuration it writes the training set once, then fits it with
A, B, A, B, ... (R times each; `lsefit slds --latent-dim D --markov
--threads 1`), and prints per program the median CPU seconds of the whole
command (user + system of the child: a loaded machine inflates it far
less than wall time), the final ELBO and the iterations, and the ratio
A/B of the medians.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lslds_vs_ssm as vs  # noqa: E402


def fit(lsefit, csv, K, D, iters, out):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([lsefit, "slds", csv, "--sequence", "seq", "-k", str(K),
                    "--latent-dim", str(D), "--markov", "--max-iter",
                    str(iters), "--seed", "1", "--threads", "1", "-q", "-o",
                    out], check=True, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.load(open(out))
    return ((r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
            doc["elbo"], doc["n_iter"])


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0].startswith("-"):
        sys.exit(__doc__)
    a, b = os.path.abspath(args[0]), os.path.abspath(args[1])
    reps = int(args[args.index("--reps") + 1]) if "--reps" in args else 3
    iters = int(args[args.index("--iters") + 1]) if "--iters" in args else 50
    configs = [(2, 2, 4, 1000, 2)] if "--quick" in args else [
        (2, 2, 4, 1000, 2), (3, 3, 10, 4000, 4), (4, 4, 20, 10000, 4),
        (2, 2, 8, 20000, 4)]
    print("config,program,cpu_s_median,elbo,iters,ratio_A_over_B")
    for ci, (K, D, N, T, S) in enumerate(configs):
        rng = np.random.default_rng(100 + ci)
        m = vs.random_model(K, D, N, rng)
        train = [vs.simulate(m, T // S, rng) for _ in range(S)]
        name = "K%d_D%d_N%d_T%d_S%d" % (K, D, N, T, S)
        with tempfile.TemporaryDirectory() as tmp:
            csv = os.path.join(tmp, "train.csv")
            vs.write_csv(csv, [t[2] for t in train])
            res = {"A": [], "B": []}
            for _ in range(reps):
                for prog, exe in (("A", a), ("B", b)):
                    res[prog].append(fit(exe, csv, K, D, iters,
                                         os.path.join(tmp, prog + ".json")))
            med = {p: float(np.median([r[0] for r in res[p]])) for p in res}
            for p in ("A", "B"):
                print("%s,%s,%.4g,%.10f,%d,%s" % (
                    name, p, med[p], res[p][-1][1], res[p][-1][2],
                    "%.1f" % (med["A"] / med["B"]) if p == "B" else ""),
                    flush=True)


if __name__ == "__main__":
    main()
