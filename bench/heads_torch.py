#!/usr/bin/python3
"""One inference + learning step of the masked-digits attention model
(examples/heads_digits.c) in lsegraph and in PyTorch eager, same run
(docs/performance.md, "Attention heads").

    bench/heads_torch.py [BUILD_DIR] [--steps N]      (default build, 20)

The step, in both: the scores of every head S_h = (Q W_c^h')(B W_p^h')'/sqrt(k),
their softmax and the heads term's energy -sum_h sum_c logsumexp(S_h(c, .)),
the reconstruction R = (1/H) sum_h A_h V, the loss 1/(2 n) ||R - T||^2, its
gradient with respect to W_c and W_p, one Adam step (lr 0.03). Float64 on the
CPU; PyTorch with torch.set_num_threads(1 and 2), lsegraph with
OMP_NUM_THREADS=1 and 2. Before timing, the loss, the energy and both
gradients at the same initial parameters are compared (relative to the
largest entry; must agree to 1e-10). Times: median over BENCH_REPS (default
5) runs of N steps, after a warm-up run. PyTorch is skipped when it cannot be
imported (Debian: python3-torch).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchio  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HALF, NCLASS, LR = 32, 10, 0.03

# (name, queries per step, bank images, heads, k, shared keys)
CONFIGS = [
    ("digits model: 64 queries, bank 500, H 4, k 8", 64, 500, 4, 8, 0),
    ("same, shared keys (multi-query)", 64, 500, 4, 8, 1),
    ("larger: 256 queries, bank 1000, H 8, k 16", 256, 1000, 8, 16, 0),
]


def write(path, m):
    m = np.ascontiguousarray(m, dtype="<f8")
    with open(path, "wb") as f:
        f.write(b"LSEBENCH")
        f.write(np.array(m.shape, dtype="<u8").tobytes())
        f.write(m.tobytes())


def inputs(nq, nb, H, k, shared):
    """The example's data: bank = first nb training images, queries = the
    top halves of the next nq, targets [bottom half | one-hot]."""
    d = np.loadtxt(os.path.join(ROOT, "data", "digits.csv"), delimiter=",",
                   skiprows=1)
    train = d[np.arange(len(d)) % 5 != 0]
    x, y = train[:, :64] / 16.0, train[:, 64].astype(int)
    if nb + nq > len(train):
        nq = len(train) - nb
    bank = x[:nb]
    onehot = np.eye(NCLASS)[y]
    values = np.hstack([bank[:, HALF:], onehot[:nb]])
    q = x[nb:nb + nq, :HALF]
    target = np.hstack([x[nb:nb + nq, HALF:], onehot[nb:nb + nq]])
    rng = np.random.default_rng(13)
    hp = 1 if shared else H
    wc = rng.uniform(-1, 1, (H * k, HALF)) / np.sqrt(HALF)
    wp = rng.uniform(-1, 1, (hp * k, 64)) / np.sqrt(64)
    return dict(query=q, bank=bank, values=values, target=target, wc=wc,
                wp=wp)


def torch_step_fn(m, H, k, shared):
    q = torch.tensor(m["query"])
    bank = torch.tensor(m["bank"])
    v = torch.tensor(m["values"])
    t = torch.tensor(m["target"])
    wc = torch.tensor(m["wc"], requires_grad=True)
    wp = torch.tensor(m["wp"], requires_grad=True)
    n = q.shape[0]
    opt = torch.optim.Adam([wc, wp], lr=LR)

    def forward():
        qh = (q @ wc.T).view(n, H, k).transpose(0, 1)          # (H, n, k)
        kh = (bank @ wp.T).view(bank.shape[0], -1, k).transpose(0, 1)
        s = qh @ kh.transpose(1, 2) / k ** 0.5                 # (H, n, nb)
        energy = -torch.logsumexp(s, dim=2).sum()
        a = torch.softmax(s, dim=2)
        r = (a @ v).mean(0)
        loss = 0.5 / n * ((r - t) ** 2).sum()
        return loss, energy

    def step():
        opt.zero_grad()
        loss, energy = forward()
        loss.backward()
        opt.step()

    return wc, wp, forward, step


def check(m, H, k, shared, lse_file):
    wc, wp, forward, _ = torch_step_fn(m, H, k, shared)
    loss, energy = forward()
    loss.backward()
    ref = np.concatenate([[loss.item(), energy.item()],
                          wc.grad.numpy().ravel(), wp.grad.numpy().ravel()])
    got = benchio.read(lse_file).ravel()
    if got.shape != ref.shape:
        sys.exit(f"check: {got.size} values from lsegraph, {ref.size} expected")
    rel = lambda a, b: np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)
    nwc = wc.numel()
    return (rel(got[0:1], ref[0:1]), rel(got[1:2], ref[1:2]),
            rel(got[2:2 + nwc], ref[2:2 + nwc]), rel(got[2 + nwc:], ref[2 + nwc:]))


def time_torch(m, H, k, shared, threads, steps):
    torch.set_num_threads(threads)
    out = []
    for r in range(benchio.reps() + 1):
        _, _, _, step = torch_step_fn(m, H, k, shared)
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        if r > 0:
            out.append(1e3 * (time.perf_counter() - t0) / steps)
    return benchio.median(out)


def time_lse(exe, directory, H, shared, threads, steps):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run([exe, directory, str(H), str(shared), str(steps),
                        str(threads)], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{exe}: {r.stderr.strip()}")
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            kv = dict(f.split("=") for f in line.split()[1:])
            return float(kv["ms_step"])
    sys.exit(f"{exe}: no RESULT line")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "heads_step")
    r = subprocess.run(["ninja", "-C", a.build, "bench/heads_step"],
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(exe):
        sys.exit(f"cannot build {exe}: {r.stdout[-500:]}{r.stderr[-500:]}")
    if torch is None:
        print("PyTorch not found (Debian: python3-torch): lsegraph only")
    else:
        print(f"PyTorch {torch.__version__}, float64, CPU, eager")
    print(f"{a.steps} steps per run, median of {benchio.reps()} runs\n")
    print("| model | threads | lsegraph ms/step | PyTorch ms/step | "
          "PyTorch / lsegraph |")
    print("|---|---|---|---|---|")
    checks = []
    for name, nq, nb, H, k, shared in CONFIGS:
        m = inputs(nq, nb, H, k, shared)
        with tempfile.TemporaryDirectory(prefix="lse-heads.") as tmp:
            for key, val in m.items():
                write(os.path.join(tmp, key), val)
            for threads in (1, 2):
                ms = time_lse(exe, tmp, H, shared, threads, a.steps)
                if torch is None:
                    print(f"| {name} | {threads} | {ms:.3f} | - | - |")
                    continue
                if threads == 1:
                    checks.append((name, check(m, H, k, shared,
                                               os.path.join(tmp, "lse_check"))))
                tm = time_torch(m, H, k, shared, threads, a.steps)
                print(f"| {name} | {threads} | {ms:.3f} | {tm:.3f} | "
                      f"{tm / ms:.1f} |", flush=True)
    worst = 0.0
    for name, c in checks:
        print(f"check ({name}): loss {c[0]:.1e}, energy {c[1]:.1e}, "
              f"dW_c {c[2]:.1e}, dW_p {c[3]:.1e} (relative)")
        worst = max(worst, *c)
    if checks and worst > 1e-10:
        sys.exit(f"lsegraph and PyTorch differ by {worst:.1e} > 1e-10")


if __name__ == "__main__":
    main()
