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

    bench/gmm_speed.py --wall [--repeat R] BUILD_DIR [BUILD_DIR ...]

Wall time (issue 16: less wall time than mclust's default): cell by cell
(Faithful and Iris x full/diag/spherical/tied), interleaved, each build's
`lsefit gmm DATA -k 1:8 --covariance C -q` at its default thread count
(LSE_NUM_THREADS, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS unset, as a
user runs it) and with `--threads 1`, then mclust's default for the same
cells, `Mclust(X, G = 1:8, modelNames = M)` (M = VVV, VVI, VII, EEE), its
wall (elapsed) and CPU (user + system) time measured inside R around the
call (R's start-up and reading not counted; lsefit's figures are whole
processes). Prints the medians over repeats of the summed wall and CPU
times of the 8 cells, and whether every lsefit run printed the same text
as the first build's default run. A build may be given as
DIR@VAR=VALUE[,VAR=VALUE]: its lsefit runs get those environment
variables, so two settings of one build are compared interleaved.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

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


MCLUST_CELL_R = r"""
suppressPackageStartupMessages(library(mclust))
a <- commandArgs(TRUE)
X <- read.csv(a[1])
X <- as.matrix(X[, sapply(X, is.numeric), drop = FALSE])
t0 <- proc.time()
b <- Mclust(X, G = 1:8, modelNames = a[2], verbose = FALSE)
t1 <- proc.time()
cat(t1[["elapsed"]] - t0[["elapsed"]],
    t1[["user.self"]] + t1[["sys.self"]] - t0[["user.self"]] - t0[["sys.self"]],
    "\n")
"""
MCLUST_MODEL = {"full": "VVV", "diag": "VVI", "spherical": "VII",
                "tied": "EEE"}


def build_env(spec):
    """'DIR@VAR=V,VAR2=W' -> (DIR, {VAR: V, ...}): one build run under
    extra environment variables (the --wall mode's A/B of a setting)"""
    if "@" not in spec:
        return spec, {}
    d, kv = spec.split("@", 1)
    return d, dict(p.split("=", 1) for p in kv.split(",") if p)


def run_wall(cmd, env):
    """(output, wall s, CPU s) of one process"""
    c0 = child_cpu()
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=env).stdout
    return out, time.perf_counter() - t0, child_cpu() - c0


def wall_main(builds, repeat):
    default_env = {k: v for k, v in os.environ.items()
                   if k not in ("LSE_NUM_THREADS", "OMP_NUM_THREADS",
                                "OPENBLAS_NUM_THREADS")}
    have_r = shutil.which("Rscript") is not None and subprocess.run(
        ["Rscript", "-e", "library(mclust)"],
        capture_output=True).returncode == 0
    script = None
    if have_r:
        with tempfile.NamedTemporaryFile("w", suffix=".R",
                                         delete=False) as f:
            f.write(MCLUST_CELL_R)
        script = f.name
    rows = [(b, t) for b in builds for t in ("default", "1")]
    wall = {r: [0.0] * repeat for r in rows}
    cpu = {r: [0.0] * repeat for r in rows}
    mwall, mcpu = [0.0] * repeat, [0.0] * repeat
    outs = {}
    for r in range(repeat):
        for name, path, extra in SETS:
            for cov in COVS:
                for b, t in rows:
                    bdir, benv = build_env(b)
                    cmd = [os.path.join(bdir, "tools", "lsefit")]
                    cmd += ["--threads", "1"] if t == "1" else []
                    cmd += ["gmm", os.path.join(ROOT, path), "-k", "1:8",
                            "--covariance", cov, "-q"] + extra
                    env = dict(default_env if t == "default"
                               else os.environ)
                    env.update(benv)
                    out, w, c = run_wall(cmd, env)
                    wall[(b, t)][r] += w
                    cpu[(b, t)][r] += c
                    outs.setdefault((b, t, r), []).append(out)
                if script is not None:
                    res = subprocess.run(
                        ["Rscript", script, os.path.join(ROOT, path),
                         MCLUST_MODEL[cov]], check=True, capture_output=True,
                        text=True, env=os.environ).stdout.split()
                    mwall[r] += float(res[0])
                    mcpu[r] += float(res[1])
    if script is not None:
        os.unlink(script)
    print("| program | threads | wall (s) | CPU (s) |")
    print("|---|---|---|---|")
    for b, t in rows:
        print("| lsefit %s | %s | %.3f | %.3f |" % (
            b, "default (%d)" % os.cpu_count() if t == "default" else t,
            median(wall[(b, t)]), median(cpu[(b, t)])))
    if script is not None:
        print("| mclust Mclust(G = 1:8) | 1 | %.3f | %.3f |" % (
            median(mwall), median(mcpu)))
    else:
        print("(R or mclust missing: mclust skipped)")
    first = outs[(builds[0], "default", 0)]
    same = all(o == first for o in outs.values())
    print("outputs of every lsefit run: %s" %
          ("identical" if same else "DIFFER"))


def main():
    args = sys.argv[1:]
    repeat, tables, wall = 1, False, False
    while args and args[0].startswith("--"):
        if args[0] == "--repeat":
            repeat = int(args[1])
            args = args[2:]
        elif args[0] == "--tables":
            tables = True
            args = args[1:]
        elif args[0] == "--wall":
            wall = True
            args = args[1:]
        else:
            sys.exit("unknown option " + args[0])
    if not args:
        sys.exit(__doc__)
    if wall:
        wall_main(args, repeat)
        return
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
