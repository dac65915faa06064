# Predicted wall time of the 8 default cells (lsefit gmm -k 1:8) from per-task
# thread CPU times; needs a build with bench/emem_par_prof.patch applied (it
# prints each batch of lse_gmm_par_run under LSE_PARPROF=1; LSE_NOCREW=1 runs
# the batches without the crew). Usage: emem_par_predict.py LSEFIT [REPEATS]
# (docs/lsefit.md, "Two threads, session 11").
import subprocess, os, sys, statistics
L = sys.argv[1]; reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
cells = []
for data, extra in [("faithful", []), ("iris", ["--ignore", "species"])]:
    for cov in ["full", "diag", "spherical", "tied"]:
        cells.append((f"{data}-{cov}", ["gmm", f"{os.path.dirname(os.path.abspath(__file__))}/../data/{data}.csv", *extra, "-k", "1:8", "--covariance", cov, "-q"]))
def greedy(ts, w=2):
    h = [0.0] * w
    for t in ts:
        i = h.index(min(h)); h[i] += t
    return max(h)
def run(cmd, env):
    r = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", L] + cmd, env=dict(os.environ, LSE_PARPROF="1", **env), capture_output=True, text=True)
    cpu = None; batches = []
    for l in r.stderr.splitlines():
        if l.startswith("PAR"):
            batches.append([(int(a.split(":")[0]), float(a.split(":")[1])) for a in l.split()[1:]])
        elif "task-clock" in l:
            cpu = float(l.split(",")[0]) / 1000
    return cpu, batches
tot = {"1t": 0, "pred2t(1t)": 0, "old2t": 0, "new2t": 0, "old2t-cpu": 0, "new2t-cpu": 0}
print(f"{'cell':18s} {'1t cpu':>7s} {'pred 2t':>7s} {'old 2t':>7s} {'new 2t':>7s} {'old cpu':>7s} {'new cpu':>7s}  (s; predicted 2-thread wall)")
for name, cmd in cells:
    r1 = []; p1 = []; o2 = []; n2 = []; oc = []; nc = []
    for _ in range(reps):
        cpu, b = run(cmd + ["--threads", "1"], {})
        par = sum(t for x in b for _, t in x)
        r1.append(cpu); p1.append(cpu - par + sum(greedy([t for _, t in x]) for x in b))
        for env, out, oc_ in [({"LSE_NOCREW": "1"}, o2, oc), ({}, n2, nc)]:
            cpu, b = run(cmd, env)
            par = sum(t for x in b for _, t in x)
            mk = 0
            for x in b:
                s = {}
                for w, t in x: s[w] = s.get(w, 0) + t
                mk += max(s.values())
            out.append(cpu - par + mk); oc_.append(cpu)
    m = statistics.median
    v = [m(r1), m(p1), m(o2), m(n2), m(oc), m(nc)]
    for k, x in zip(tot, v): tot[k] += x
    print(f"{name:18s} " + " ".join(f"{x:7.3f}" for x in v))
v = list(tot.values())
print(f"{'total':18s} " + " ".join(f"{x:7.3f}" for x in v))
print(f"ratios to 1t: pred2t(1t) {v[1]/v[0]:.3f}  old2t {v[2]/v[0]:.3f}  new2t {v[3]/v[0]:.3f}")
