"""Shared helpers of the Python benchmark scripts (stdlib + NumPy only).

Matrix files (written by lse_bench_gen, bench/bench_util.h): the 8 bytes
b"LSEBENCH", rows and cols as little-endian uint64, then rows * cols
little-endian doubles, row-major.
"""
import os
import resource
import sys

import numpy as np


def read(path):
    """The matrix stored in path, shape (rows, cols)."""
    with open(path, "rb") as f:
        if f.read(8) != b"LSEBENCH":
            sys.exit(f"{path}: not a bench matrix file")
        rows, cols = np.frombuffer(f.read(16), dtype="<u8")
        data = np.frombuffer(f.read(), dtype="<f8")
    if data.size != int(rows) * int(cols):
        sys.exit(f"{path}: truncated")
    return data.reshape(int(rows), int(cols)).copy()


def load(directory, name):
    return read(os.path.join(directory, name))


def maxrss_mib():
    """Peak resident set size of this process in MiB (Linux: KiB units)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reps():
    """Runs of every timed fit (BENCH_REPS, default 5), as bench_util.h."""
    n = int(os.environ.get("BENCH_REPS", "5") or 5)
    return n if 1 <= n <= 99 else 5


def median(v):
    """Median of the list v."""
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def threads():
    """The thread count run.sh asked for (OMP_NUM_THREADS)."""
    return int(os.environ.get("OMP_NUM_THREADS", "0") or 0)


def result(**kv):
    """One 'RESULT key=value ...' line, as the C programs print."""
    print("RESULT " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)
