#!/usr/bin/python3
"""Which `--accel` should `lsefit gmm` use by default? (docs/lsefit.md,
"Acceleration"). On the bundled Faithful and Iris (columns 1-4), for
K = 1..8 and the four covariance types, one EM run to convergence (the
default stopping rule) from the same k-means++ start (seed 0), with
`--accel none` and `--accel squarem`:

    bench/gmm_accel.py BUILD_DIR [--repeat R]

prints per data set and covariance type the EM iterations summed over K,
the CPU time (user + system of the lsefit processes, median of R runs,
default 3; one thread), how many of the 8 fits reach the same optimum
(log-likelihoods within 1e-6 relative) and, where they differ, which is
higher; then Faithful K = 3 full alone (plain EM's slow case).
"""
import os
import re
import resource
import subprocess
import sys

for _v in ("LSE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = {"faithful": ("data/faithful.csv", []),
        "iris": ("data/iris.csv", ["--ignore", "species"])}
COVS = ["full", "diag", "spherical", "tied"]
ACCELS = ["none", "squarem"]


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def fit(lsefit, name, cov, k, accel):
    path, extra = SETS[name]
    cmd = [lsefit, "gmm", os.path.join(ROOT, path), "-k", str(k),
           "--covariance", cov, "--init", "kmeans++", "--seed", "0",
           "--accel", accel] + extra
    c0 = child_cpu()
    out = subprocess.run(cmd, check=True, capture_output=True,
                         text=True).stdout
    cpu = child_cpu() - c0
    ll = float(re.search(r"log-likelihood (\S+)", out).group(1))
    it = int(re.search(r"EM: (\d+) iterations", out).group(1))
    return ll, it, cpu


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lsefit = os.path.join(sys.argv[1], "tools", "lsefit")
    repeat = 3
    if len(sys.argv) > 3 and sys.argv[2] == "--repeat":
        repeat = int(sys.argv[3])
    print("| data, covariance | iterations none | iterations squarem | "
          "CPU s none | CPU s squarem | same optimum | squarem higher | "
          "none higher |")
    print("|---|---|---|---|---|---|---|---|")
    tot = {a: [0, 0.0] for a in ACCELS}
    for name in SETS:
        for cov in COVS:
            its = {a: 0 for a in ACCELS}
            cpus = {a: [0.0] * repeat for a in ACCELS}
            same = up = down = 0
            for k in range(1, 9):
                ll = {}
                for r in range(repeat):
                    for a in ACCELS:   # interleaved
                        ll[a], it, cpu = fit(lsefit, name, cov, k, a)
                        cpus[a][r] += cpu
                        if r == 0:
                            its[a] += it
                if abs(ll["squarem"] - ll["none"]) <= 1e-6 * abs(ll["none"]):
                    same += 1
                elif ll["squarem"] > ll["none"]:
                    up += 1
                else:
                    down += 1
            med = {a: sorted(cpus[a])[repeat // 2] for a in ACCELS}
            for a in ACCELS:
                tot[a][0] += its[a]
                tot[a][1] += med[a]
            print("| %s, %s | %d | %d | %.3f | %.3f | %d | %d | %d |" % (
                name, cov, its["none"], its["squarem"], med["none"],
                med["squarem"], same, up, down))
    print("| all | %d | %d | %.3f | %.3f | | | |" % (
        tot["none"][0], tot["squarem"][0], tot["none"][1],
        tot["squarem"][1]))
    print()
    for a in ACCELS:
        ll, it, _ = fit(lsefit, "faithful", "full", 3, a)
        print("Faithful K = 3 full, --accel %s: %d iterations, "
              "log-likelihood %.6f" % (a, it, ll))


if __name__ == "__main__":
    main()
