#!/usr/bin/python3
"""Turn the RESULT lines of bench/run.sh into the table of
docs/performance.md (stdlib only).

    table.py RESULTS_FILE

Ratios are peer time / lsegraph time (> 1: lsegraph is faster). The
roofline column of a full-covariance GMM is t / (F / P) with P the dgemm
rate measured in the same run at the same thread count and F the minimal
flop count of one EM iteration through Cholesky factors:
    F = N K (2 d^2 + 5 d)
(E-step triangular solves N K d^2, quadratic forms 2 N K d; M-step
symmetric scatter N K d (d + 1), first moments 2 N K d).
"""
import sys
from collections import defaultdict


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            kv = dict(tok.split("=", 1) for tok in line.split()[1:])
            rows.append(kv)
    return rows


def fnum(s, fmt="{:.1f}"):
    try:
        return fmt.format(float(s))
    except (TypeError, ValueError):
        return "-"


def main():
    rows = parse(sys.argv[1])
    peak = {}
    by = defaultdict(dict)  # (case, threads) -> tool -> row
    attention = []
    for r in rows:
        t = int(r.get("threads", 0))
        if r["tool"] == "dgemm":
            peak[t] = float(r["gflops"])
        elif r["case"].startswith("attention"):
            attention.append(r)
        else:
            by[(r["case"], t)][r["tool"]] = r
    for t in sorted(peak):
        print(f"dgemm 2000x2000, {t} thread(s): {peak[t]:.1f} GFLOP/s")
    print()
    head = ("| case | thr | lsegraph ms/it | peer | peer ms/it | speed-up "
            "| roofline x | loglik lsegraph | loglik peer | rel. diff "
            "| RSS MiB lse / peer |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for (case, t) in sorted(by, key=lambda ct: (ct[0], ct[1])):
        tools = by[(case, t)]
        lse = tools.get("lsegraph")
        if lse is None:
            continue
        roof = "-"
        if case.endswith("-full") and t in peak:
            n, d, k = (float(lse[x]) for x in ("n", "d", "k"))
            flops = n * k * (2 * d * d + 5 * d)
            t_roof = flops / (peak[t] * 1e9)
            roof = f"{float(lse['ms_per_iter']) / 1e3 / t_roof:.2f}"
        ms_l = float(lse["ms_per_iter"])
        ll_l = float(lse["loglik"])
        rss_l = fnum(lse.get("rss_mib"), "{:.0f}")
        peers = [p for p in ("sklearn", "vlfeat", "armadillo", "numpy") if p in tools]
        if not peers:
            print(f"| {case} ({lse['iters']} it) | {t} | {ms_l:.1f} | - | - "
                  f"| - | {roof} | {ll_l:.10e} | - | - | {rss_l} / - |")
        for p in peers:
            peer = tools[p]
            ms_p = float(peer["ms_per_iter"])
            ll_p = float(peer["loglik"])
            rel = abs(ll_l - ll_p) / abs(ll_p)
            rss_p = fnum(peer.get("rss_mib"), "{:.0f}")
            print(f"| {case} ({lse['iters']}/{peer['iters']} it) | {t} "
                  f"| {ms_l:.1f} | {p} | {ms_p:.1f} | {ms_p / ms_l:.1f}x "
                  f"| {roof} | {ll_l:.10e} | {ll_p:.10e} | {rel:.1e} "
                  f"| {rss_l} / {rss_p} |")
    for r in attention:
        print()
        print(f"self-attention {r['case']} ({r['threads']} thread(s)): "
              f"energy + gradient in {float(r['seconds']):.1f} s, "
              f"peak RSS {float(r['rss_mib']):.0f} MiB "
              f"(a dense T x T matrix alone: {float(r['dense_s_mib']):.0f} MiB)")


if __name__ == "__main__":
    main()
