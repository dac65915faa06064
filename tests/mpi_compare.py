#!/usr/bin/env python3
"""Compare two lsefit model files (tests/test_mpi.sh, bench/mpi_scaling.sh).

usage: mpi_compare.py REFERENCE.json OTHER.json [RTOL]

Every number outside "options" must agree: integers and booleans exactly,
scalars (log-likelihood, BIC, AIC, ...) to RTOL relative (default 1e-10),
arrays (weights, means, covariances, A, b, transition, ...) to RTOL times
the largest absolute entry of the reference array. Prints the largest
relative difference; exit status 1 when a value disagrees.
"""
import json
import sys


def leaves(x):
    if isinstance(x, list):
        for v in x:
            yield from leaves(v)
    elif isinstance(x, dict):
        for k in sorted(x):
            yield from leaves(x[k])
    else:
        yield x


def main():
    ref = json.load(open(sys.argv[1]))
    other = json.load(open(sys.argv[2]))
    rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-10
    bad = []
    worst = 0.0
    if set(ref) != set(other):
        bad.append("keys differ: %s" % sorted(set(ref) ^ set(other)))
    for key in sorted(set(ref) & set(other)):
        if key == "options":
            continue
        a, b = ref[key], other[key]
        if isinstance(a, (bool, int, str)) or a is None:
            if a != b:
                bad.append("%s: %r != %r" % (key, a, b))
            continue
        la, lb = list(leaves(a)), list(leaves(b))
        if len(la) != len(lb):
            bad.append("%s: %d != %d values" % (key, len(la), len(lb)))
            continue
        if not all(isinstance(v, float) or type(v) is int for v in la):
            if la != lb:
                bad.append("%s differs" % key)
            continue
        scale = max(abs(v) for v in la) if la else 0.0
        for i, (u, v) in enumerate(zip(la, lb)):
            ref_scale = abs(u) if isinstance(a, float) else scale
            diff = abs(u - v)
            rel = diff / ref_scale if ref_scale > 0 else diff
            worst = max(worst, rel)
            if rel > rtol:
                bad.append("%s[%d]: %.17g vs %.17g (relative %.3g)"
                           % (key, i, u, v, rel))
    print("largest relative difference %.3g" % worst)
    for b in bad[:20]:
        print("MISMATCH " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
