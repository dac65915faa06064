#!/usr/bin/python3
"""Which start should `lsefit gmm` use by default? (docs/lsefit.md,
"Starts"). On the bundled Faithful and Iris (columns 1-4), for K = 1..8 and
the four covariance types (64 cells), the log-likelihood each method
reaches and its time:

  lsefit gmm DATA -k 1:8 --covariance C --init M   for each start M
  scikit-learn GaussianMixture (defaults: k-means start, tol 1e-3), n_init
  1 and 10 (skipped without sklearn)
  mclust's Mclust (default: hcVVV start), models VVV/VVI/VII/EEE = full,
  diag, spherical, tied (skipped without R and mclust)

    bench/gmm_starts.py BUILD_DIR [--starts kmeans++,...] [--repeat R]
                        [--instructions] [--lsefit-only]
    bench/gmm_starts.py cells BUILD_DIR [START]
    bench/gmm_starts.py best BUILD_DIR [STARTS]

--instructions runs each lsefit process under valgrind's callgrind and
adds the instructions it executed, summed over the 64 cells (8 processes),
to the table: a measure of CPU work that the load of a shared machine does
not disturb (about 100 times slower to run). --lsefit-only leaves out
scikit-learn and mclust.

`cells` prints, for one lsefit start (default emem), the log-likelihood of
every cell as a Markdown table, a cell below its target marked with its
gap: deterministic output, quoted in docs/lsefit.md ("Starts").

The target of each cell is fixed: bench/gmm_starts_best.txt, written by
`best` (bench/gmm_search.c, built by `ninja -C BUILD_DIR
bench/gmm_search`: STARTS (default 1000) short runs of 30 iterations from
each of k-means++, k-means and random-responsibility starts plus the splits
of the K - 1 optimum, the 20 best of each kind to a relative change of
1e-12), the best NON-DEGENERATE optimum found: no covariance eigenvalue
below 1e-4 (100 x reg_covar). Two targets (Faithful diag and Iris full,
K = 8, found_by "merge") were raised in session 12 to optima lsefit's
merges of a K = 9 fit found and the search did not; `best` keeps them
while it finds less. Faithful's waiting times are integers and
Iris is measured to 0.1 cm, so a component can collapse onto a lattice line
and gain without bound but for reg_covar; such fits are higher still and
count as reaching the target, but they are not the target. A method
"reaches" a cell when it is within 0.01 of the target (lsefit and
scikit-learn add reg_covar 1e-6 to the covariances, mclust nothing).

Every tool runs on one thread (LSE_NUM_THREADS, OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS are set to 1 here): mclust is single-threaded, and on
data this small threads only add synchronization. The methods run
interleaved, cell by cell (A B C ... A B C ...), R times (--repeat,
default 1), so programs run back to back see the same load; the table
gives the median over repeats of each method's summed wall time and
summed CPU time (user + system), twice: "fit" is measured around the fits
only for mclust (`Mclust(X, G = 1:8, modelNames = M)` inside R) and
scikit-learn (inside Python), and is the whole process for lsefit
(reading, fitting, printing: its start-up and reading cost about 0.005 s
per process, `lsefit gmm DATA -k 1 --init kmeans++`); "process" is the
whole process for lsefit and for mclust's Rscript (R's start-up,
library(mclust), reading, Mclust, the summaries), as a user runs them
from a shell. Wall times on a loaded machine follow the load; CPU times
much less.
"""
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

for _v in ("LSE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = {"faithful": ("data/faithful.csv", [], 2),
        "iris": ("data/iris.csv", ["--ignore", "species"], 4)}
COVS = ["full", "diag", "spherical", "tied"]
MCLUST = {"full": "VVV", "diag": "VVI", "spherical": "VII", "tied": "EEE"}
KMAX = 8
TOL = 0.01
BEST = os.path.join(ROOT, "bench", "gmm_starts_best.txt")


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# method -> instructions executed (--instructions), summed over its cells
INSTR = {}


def callgrind(cmd, method):
    """run cmd under callgrind; its instructions are added to INSTR[method]"""
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "cg.out")
        out = subprocess.run(["valgrind", "--tool=callgrind",
                              "--callgrind-out-file=" + f] + cmd, check=True,
                             capture_output=True, text=True).stdout
        with open(f) as g:
            for line in g:
                if line.startswith("summary:"):
                    INSTR[method] = INSTR.get(method, 0) + int(line.split()[1])
    return out


def run_lsefit(lsefit, path, extra, cov, init, instr=False):
    cmd = [lsefit, "gmm", path, "-k", "1:%d" % KMAX, "--covariance", cov,
           "--init", init, "-q"] + extra
    c0 = child_cpu()
    t0 = time.perf_counter()
    if instr:
        out = callgrind(cmd, "lsefit --init " + init)
    else:
        out = subprocess.run(cmd, check=True, capture_output=True,
                             text=True).stdout
    secs = time.perf_counter() - t0
    cpu = child_cpu() - c0
    ll = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\d+\s+(\S+)\s", line)
        if m:
            ll[int(m.group(1))] = float(m.group(2))
    return ll, secs, cpu


def run_sklearn(x, cov, n_init):
    import warnings
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture
    ll = {}
    c0 = time.process_time()
    t0 = time.perf_counter()
    for k in range(1, KMAX + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            g = GaussianMixture(k, covariance_type=cov, n_init=n_init,
                                random_state=0).fit(x)
        ll[k] = g.score(x) * x.shape[0]
    return ll, time.perf_counter() - t0, time.process_time() - c0


R_SCRIPT = r"""
suppressPackageStartupMessages(library(mclust))
a <- commandArgs(TRUE)
X <- read.csv(a[1])
if (a[2] == "iris") X <- X[, 1:4]
X <- as.matrix(X)
t0 <- proc.time()
b <- Mclust(X, G = 1:%d, modelNames = a[3], verbose = FALSE)$BIC
t1 <- proc.time()
for (k in 1:%d) {
  f <- tryCatch(summary(b, X, G = k, modelNames = a[3]), error = function(e) NULL)
  cat(k, if (is.null(f)) NA else sprintf("%%.10g", f$loglik), "\n")
}
cat("secs", t1[["elapsed"]] - t0[["elapsed"]],
    t1[["user.self"]] + t1[["sys.self"]] - t0[["user.self"]] - t0[["sys.self"]],
    "\n")
""" % (KMAX, KMAX)


def run_mclust(path, name, model, script):
    c0 = child_cpu()
    t0 = time.perf_counter()
    out = subprocess.run(["Rscript", script, path, name, model], check=True,
                         capture_output=True, text=True).stdout
    proc = (time.perf_counter() - t0, child_cpu() - c0)
    ll, secs, cpu = {}, 0.0, 0.0
    for line in out.splitlines():
        f = line.split()
        if f[0] == "secs":
            secs, cpu = float(f[1]), float(f[2])
        elif f[1] != "NA":
            ll[int(f[0])] = float(f[1])
    PROCESS[model] = proc
    return ll, secs, cpu


# the whole Rscript process of the last run_mclust of a model: R's start-up,
# library(mclust), reading, Mclust and the summaries (wall, CPU)
PROCESS = {}


def best_main(build, starts):
    """bench/gmm_starts.py best BUILD_DIR [STARTS]: the fixed targets"""
    prog = os.path.join(build, "bench", "gmm_search")
    if not os.path.exists(prog):
        sys.exit("gmm_starts.py: %s missing: ninja -C %s bench/gmm_search"
                 % (prog, build))
    lines = ["# best-known log-likelihoods: bench/gmm_starts.py best %s %d"
             % (os.path.basename(build.rstrip("/")), starts),
             "# set cov K best_nondegenerate found_by best_overall found_by"]
    for n, (p, _, d) in SETS.items():
        for c in COVS:
            out = subprocess.run([prog, os.path.join(ROOT, p), str(d), c,
                                  str(KMAX), str(starts), "30", "20"],
                                 check=True, capture_output=True,
                                 text=True).stdout
            for line in out.splitlines():
                lines.append("%s %s %s" % (n, c, line))
                print(lines[-1], flush=True)
    # targets raised by hand from lsefit's own fits (found_by "merge",
    # bench/gmm_starts_best.txt's header) stay while the search is lower
    old = {}
    with open(BEST) as f:
        old = {tuple(g[:3]): g for g in (ln.split() for ln in f)
               if g and g[0] != "#" and g[4] == "merge"}
    for i, ln in enumerate(lines):
        g = ln.split()
        o = old.get(tuple(g[:3]))
        if g[0] != "#" and o is not None and float(o[3]) > float(g[3]):
            lines[i] = " ".join(g[:3] + o[3:5] + g[5:])
    with open(BEST, "w") as f:
        f.write("\n".join(lines) + "\n")


def load_best():
    best = {}
    with open(BEST) as f:
        for line in f:
            if line.startswith("#"):
                continue
            g = line.split()
            best[(g[0], g[1], int(g[2]))] = float(g[3])
    return best


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] +
                                              v[len(v) // 2]) / 2


def cells_main(build, init):
    """bench/gmm_starts.py cells BUILD_DIR [START]: the per-cell table"""
    lsefit = os.path.join(build, "tools", "lsefit")
    target = load_best()
    print("| %s | %s |" % ("data, covariance", " | ".join(
        "K = %d" % k for k in range(1, KMAX + 1))))
    print("|---|%s" % ("---|" * KMAX))
    below = 0
    for n in SETS:
        for c in COVS:
            ll = run_lsefit(lsefit, os.path.join(ROOT, SETS[n][0]),
                            SETS[n][1], c, init)[0]
            row = []
            for k in range(1, KMAX + 1):
                v, b = ll.get(k, float("-inf")), target[(n, c, k)]
                if v < b - TOL:
                    below += 1
                    row.append("%.2f (%.2f below)" % (v, b - v))
                else:
                    row.append("%.2f" % v)
            print("| %s, %s | %s |" % (n, c, " | ".join(row)))
    print()
    print("%d of %d cells reached (within %g of the target)." % (
        len(SETS) * len(COVS) * KMAX - below, len(SETS) * len(COVS) * KMAX,
        TOL))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "best":
        return best_main(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3
                         else 1000)
    if sys.argv[1] == "cells":
        return cells_main(sys.argv[2], sys.argv[3] if len(sys.argv) > 3
                          else "emem")
    lsefit = os.path.join(sys.argv[1], "tools", "lsefit")
    starts = "kmeans++,kmeans,hcvvv,emem,emem+hc".split(",")
    repeat = 1
    instr = False
    others = True
    args = sys.argv[2:]
    while args:
        if args[0] == "--instructions":
            instr = True
            args = args[1:]
            continue
        if args[0] == "--lsefit-only":
            others = False
            args = args[1:]
            continue
        if args[0] == "--starts":
            starts = args[1].split(",")
        elif args[0] == "--repeat":
            repeat = int(args[1])
        args = args[2:]
    target = load_best()
    runners = [("lsefit --init " + s,
                lambda n, c, s=s: run_lsefit(lsefit, os.path.join(
                    ROOT, SETS[n][0]), SETS[n][1], c, s, instr))
               for s in starts]
    try:
        if not others:
            raise ImportError("--lsefit-only")
        import numpy as np
        data = {"faithful": np.loadtxt(os.path.join(ROOT, SETS["faithful"][0]),
                                       delimiter=",", skiprows=1),
                "iris": np.loadtxt(os.path.join(ROOT, SETS["iris"][0]),
                                   delimiter=",", skiprows=1,
                                   usecols=(0, 1, 2, 3))}
        import sklearn  # noqa: F401
        for ni in (1, 10):
            runners.append(("scikit-learn n_init=%d" % ni,
                            lambda n, c, ni=ni: run_sklearn(data[n], c, ni)))
    except ImportError:
        if others:
            print("(scikit-learn missing: skipped)")
    have_r = others and shutil.which("Rscript") is not None and subprocess.run(
        ["Rscript", "-e", "library(mclust)"], capture_output=True
    ).returncode == 0
    script = None
    if have_r:
        with tempfile.NamedTemporaryFile("w", suffix=".R",
                                         delete=False) as f:
            f.write(R_SCRIPT)
        script = f.name
        runners.append(("mclust default (hcVVV)",
                        lambda n, c: run_mclust(os.path.join(ROOT, SETS[n][0]),
                                                n, MCLUST[c], script)))
    elif others:
        print("(R or mclust missing: skipped)")
    methods = [m for m, _ in runners]
    res = {m: {} for m in methods}      # method -> (set, cov) -> {k: ll}
    wall = {m: [0.0] * repeat for m in methods}
    cpu = {m: [0.0] * repeat for m in methods}
    pwall = {m: [0.0] * repeat for m in methods}
    pcpu = {m: [0.0] * repeat for m in methods}
    for r in range(repeat):
        for n in SETS:
            for c in COVS:
                for m, run in runners:   # interleaved, cell by cell
                    ll, secs, cs = run(n, c)
                    res[m][(n, c)] = ll
                    wall[m][r] += secs
                    cpu[m][r] += cs
                    if m.startswith("lsefit"):   # a whole process already
                        pwall[m][r] += secs
                        pcpu[m][r] += cs
                    elif m.startswith("mclust"):
                        pwall[m][r] += PROCESS[MCLUST[c]][0]
                        pcpu[m][r] += PROCESS[MCLUST[c]][1]
    if script is not None:
        os.unlink(script)
    print("| method | cells below the target (of 64) | largest gap | "
          "cells above it | fit wall (s) | fit CPU (s) | process wall (s) | "
          "process CPU (s) |%s" % (" instructions (1e9) |" if instr else ""))
    print("|---|---|---|---|---|---|---|---|%s" % ("---|" if instr else ""))
    for m in methods:
        below, above, gap = [], 0, 0.0
        for key, ll in res[m].items():
            for k in range(1, KMAX + 1):
                b = target[key + (k,)]
                v = ll.get(k, float("-inf"))
                if v < b - TOL:
                    below.append(key + (k,))
                    gap = max(gap, b - v)
                elif v > b + TOL:
                    above += 1
        proc = ("| %.2f | %.2f" % (median(pwall[m]), median(pcpu[m]))
                if median(pwall[m]) > 0 else "| - | -")
        ins = ""
        if instr:
            ins = (" %.2f |" % (INSTR[m] / repeat / 1e9) if m in INSTR
                   else " - |")
        print("| %s | %d | %.3g | %d | %.2f | %.2f %s |%s" % (
            m, len(below), gap, above, median(wall[m]), median(cpu[m]), proc,
            ins))
    print()
    print("Targets (bench/gmm_starts_best.txt):")
    for n in SETS:
        for c in COVS:
            print("  %s %s: %s" % (n, c, " ".join(
                "%.3f" % target[(n, c, k)] for k in range(1, KMAX + 1))))
    print()
    for m in methods:
        cells = []
        for key, ll in res[m].items():
            for k in range(1, KMAX + 1):
                if ll.get(k, float("-inf")) < target[key + (k,)] - TOL:
                    cells.append("%s/%s/K%d" % (key[0][:4], key[1][:4], k))
        print("%s: below at %s" % (m, ", ".join(cells) if cells else "none"))


if __name__ == "__main__":
    main()
