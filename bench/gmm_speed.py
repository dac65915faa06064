#!/usr/bin/python3
"""Speed of small fits (docs/lsefit.md, "Speed of small fits"): the CPU
time of the default `lsefit gmm` on the start table's 8 cells of work
(Faithful and Iris columns 1-4, x full/diag/spherical/tied, -k 1:8, one
thread), and of the model table (`--covariance all -k 1:9`) against
mclust's mclustBIC(X, G = 1:9) (skipped without R and mclust), for one or
more lsefit builds run interleaved (A B A B ...) R times.

    bench/gmm_speed.py [--repeat R] [--tables] BUILD_DIR [BUILD_DIR ...]

CPU time = user + system of the lsefit processes (getrusage of the
children: reading, fitting, printing), and for mclust the user + system
time of mclustBIC inside R (proc.time, so R's start-up is not counted).
The median over repeats is printed. The default fits' outputs of the
builds are compared: a line says whether every build printed the same
text.
"""
import os
import resource
import subprocess
import sys

for _v in ("LSE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = [("faithful", "data/faithful.csv", []),
        ("iris", "data/iris.csv", ["--ignore", "species"])]
COVS = ["full", "diag", "spherical", "tied"]
MCLUST_R = """suppressMessages(library(mclust))
x <- read.csv("%s")
x <- x[, sapply(x, is.numeric), drop = FALSE]
t0 <- proc.time()
b <- mclustBIC(x, G = 1:9, verbose = FALSE)
t <- proc.time() - t0
cat(sprintf("%%.3f\\n", t[["user.self"]] + t[["sys.self"]]))
"""


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd):
    c0 = child_cpu()
    out = subprocess.run(cmd, check=True, capture_output=True,
                         text=True).stdout
    return out, child_cpu() - c0


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] +
                                                     v[len(v) // 2])


def main():
    args = sys.argv[1:]
    repeat, tables = 1, False
    while args and args[0].startswith("--"):
        if args[0] == "--repeat":
            repeat = int(args[1])
            args = args[2:]
        elif args[0] == "--tables":
            tables = True
            args = args[1:]
        else:
            sys.exit("unknown option " + args[0])
    if not args:
        sys.exit(__doc__)
    builds = args
    starts = {b: [] for b in builds}
    tabs = {(b, s[0]): [] for b in builds for s in SETS}
    outs = {}
    for r in range(repeat):
        for b in builds:
            lsefit = os.path.join(b, "tools", "lsefit")
            total = 0.0
            for name, path, extra in SETS:
                for cov in COVS:
                    out, cpu = run([lsefit, "gmm", os.path.join(ROOT, path),
                                    "-k", "1:8", "--covariance", cov, "-q"] +
                                   extra)
                    total += cpu
                    outs.setdefault(b, []).append(out)
            starts[b].append(total)
            for name, path, extra in SETS if tables else []:
                out, cpu = run([lsefit, "gmm", os.path.join(ROOT, path),
                                "-k", "1:9", "--covariance", "all", "-q"] +
                               extra)
                tabs[(b, name)].append(cpu)
    print("| build | default fits, 8 processes (CPU s) |" +
          ("".join(" %s table (CPU s) |" % s[0] for s in SETS)
           if tables else ""))
    print("|---|---|" + ("---|" * len(SETS) if tables else ""))
    for b in builds:
        print("| %s | %.3f |" % (b, median(starts[b])) +
              ("".join(" %.3f |" % median(tabs[(b, s[0])]) for s in SETS)
               if tables else ""))
    same = all(outs[b] == outs[builds[0]] for b in builds)
    print("default fits' outputs of the builds: %s" % ("identical" if same else "DIFFER"))
    if tables and subprocess.run(["Rscript", "-e", "library(mclust)"],
                                 capture_output=True).returncode == 0:
        for name, path, _ in SETS:
            t = []
            for r in range(repeat):
                res = subprocess.run(
                    ["Rscript", "-e", MCLUST_R % os.path.join(ROOT, path)],
                    check=True, capture_output=True, text=True)
                t.append(float(res.stdout.split()[-1]))
            print("mclust mclustBIC(G = 1:9), %s: %.3f CPU s" %
                  (name, median(t)))


if __name__ == "__main__":
    main()
