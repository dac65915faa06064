#!/usr/bin/python3
"""Streaming self-attention energy + gradient: lsegraph against its FLOP
roofline and against PyTorch autograd, in one run (docs/performance.md,
"Streaming attention").

    bench/attn_torch.py [BUILD_DIR] [--threads N] [--reps R] [--big T]

BUILD_DIR (default build-rel) must hold bench/attn_stream (it is built here
with ninja if missing). The energy, in both:

    E = -sum_i logsumexp_j(q_i . k_j / sqrt(d)),   dE/dQ, dE/dK,

Q, K (T, 64) float64 from the same generator (bench/attn_stream.c's LCG).
At T = 8192 both run (PyTorch: torch.set_num_threads(N), E.backward(), the
dense T x T matrices); the energy and both gradient norms must agree to
1e-10 relative. At the big T (default 65536) lsegraph alone runs (PyTorch
would hold 32 GiB per T x T matrix). The roofline is 6 T^2 d flops at the
dgemm rate plus T^2 exponentials at the library's exp rate, both measured
by bench/attn_stream in the same process; seconds are the best of R runs.
CPU columns: CPU seconds per thread (process CPU time / threads) and rates
measured the same way, the figures to read on a loaded machine (the wall
clock there mostly counts waiting for a core).
PyTorch is skipped when it cannot be imported (Debian: python3-torch).
"""
import argparse
import os
import resource
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
except ImportError:
    np = torch = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = 64


def lcg_inputs(T, d):
    """Q, K exactly as bench/attn_stream.c fills them."""
    mask = (1 << 64) - 1
    a, c = 6364136223846793005, 1442695040888963407
    s = 12345
    q = [0.0] * (T * d)
    k = [0.0] * (T * d)
    for i in range(T * d):
        s = (s * a + c) & mask
        q[i] = (s >> 11) / 4503599627370496.0 - 1.0
        s = (s * a + c) & mask
        k[i] = (s >> 11) / 4503599627370496.0 - 1.0
    return (np.array(q).reshape(T, d), np.array(k).reshape(T, d))


def run_lsegraph(build, T, threads, reps):
    exe = os.path.join(build, "bench", "attn_stream")
    out = subprocess.run([exe, str(T), str(D), str(threads), str(reps)],
                         check=True, capture_output=True, text=True).stdout
    line = [x for x in out.splitlines() if x.startswith("RESULT")][-1]
    return dict(kv.split("=", 1) for kv in line.split()[1:])


def run_torch(T, threads, reps):
    torch.set_num_threads(threads)
    qn, kn = lcg_inputs(T, D)
    best = best_cpu = float("inf")
    for _ in range(reps):
        q = torch.tensor(qn, requires_grad=True)
        k = torch.tensor(kn, requires_grad=True)
        t0, c0 = time.perf_counter(), time.process_time()
        e = -torch.logsumexp(q @ k.T / D ** 0.5, dim=1).sum()
        e.backward()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, (time.process_time() - c0) / threads)
        res = (e.item(), q.grad.norm().item(), k.grad.norm().item())
        del q, k, e
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return best, best_cpu, res, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build-rel"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--big", type=int, default=65536,
                    help="lsegraph-only size (0: skip)")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "attn_stream")
    if not os.path.exists(exe):
        subprocess.run(["ninja", "-C", a.build, "bench/attn_stream"],
                       check=True)
    print(f"streaming attention energy + gradient, d = {D}, "
          f"{a.threads} thread(s), best of {a.reps}")
    r = run_lsegraph(a.build, 8192, a.threads, a.reps)
    print(f"machine: dgemm {r['dgemm_gflops']} GFLOP/s, library exp "
          f"{r['exp_per_ns']} /ns (wall); per CPU time {r['cpu_dgemm_gflops']}"
          f" GFLOP/s, {r['cpu_exp_per_ns']} /ns (in the lsegraph process)")
    print("| T | lsegraph s | roofline s | ratio | lsegraph CPU s | CPU roofline s "
          "| CPU ratio | peak MiB | PyTorch s | PyTorch CPU s | PyTorch/lsegraph "
          "(wall, CPU) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    torch_cell = "skipped (no torch)", "-", "-"
    if torch is not None:
        ts, tcpu, (te, tq, tk), trss = run_torch(8192, a.threads, a.reps)
        for name, x, y in (("energy", float(r["energy"]), te),
                           ("|dE/dQ|", float(r["gq"]), tq),
                           ("|dE/dK|", float(r["gk"]), tk)):
            rel = abs(x - y) / abs(y)
            if rel > 1e-10:
                sys.exit(f"attn_torch: {name} differs: lsegraph {x!r}, "
                         f"PyTorch {y!r} (relative {rel:.2e} > 1e-10)")
        torch_cell = f"{ts:.3f} (RSS {trss:.0f} MiB)", f"{tcpu:.3f}", \
            f"{ts / float(r['seconds']):.2f}, " \
            f"{tcpu / float(r['cpu_seconds']):.2f}"

    def row(T, x):
        return (f"| {T} | {float(x['seconds']):.3f} | {float(x['roofline']):.3f} "
                f"| {x['ratio']} | {float(x['cpu_seconds']):.3f} "
                f"| {float(x['cpu_roofline']):.3f} | {x['cpu_ratio']} "
                f"| {x['maxrss_mib']} |")
    print(row(8192, r) + f" {torch_cell[0]} | {torch_cell[1]} "
          f"| {torch_cell[2]} |")
    if a.big > 0:
        b = run_lsegraph(a.build, a.big, a.threads, 1)
        print(row(a.big, b) + " - | - | - |")
        print(f"(T = {a.big}: dgemm {b['dgemm_gflops']} GFLOP/s, exp "
              f"{b['exp_per_ns']} /ns in that process; one run)")
    if torch is not None:
        print("energy and gradient norms at T = 8192 agree with PyTorch to "
              "1e-10 relative")


if __name__ == "__main__":
    main()
