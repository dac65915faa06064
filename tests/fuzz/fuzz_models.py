#!/usr/bin/env python3
"""Fuzz lsefit's model-file reader (GMM and SLDS JSON) through the tool.

    fuzz_models.py LSEFIT DATA_DIR CORPUS_DIR [N_PER_SEED] [SEED]

The JSON harness (fuzz_json.c) covers the generic JSON layer; what lsefit
then checks in a model file (key types, shapes, probabilities, covariances,
names, standardization) is reached only through `lsefit gmm predict` and
`sample` and `lsefit slds segment` and `simulate`. For every model file in
CORPUS_DIR (gmm_*.json, slds_*.json), the unchanged file must be accepted,
and N_PER_SEED (default 60) deterministic mutations of it (values replaced
by extreme, negative, non-finite, wrongly typed or wrongly shaped ones, keys
removed or duplicated, names duplicated, the text truncated or bytes
flipped) are run through the tool, which must
  - exit 0, or exit 1 with one line on stderr that starts with "lsefit: "
    and names the model file (never a signal, never a sanitizer report);
  - on exit 0, print finite numbers only (no nan).
TAP output, one line per seed file (failures list the mutation).
"""
import copy
import json
import math
import os
import random
import subprocess
import sys
import tempfile

EXTREMES = [0, -1, 1e308, -1e308, 1e-320, 2**64, -2**63, 0.5, 1e16,
            "x", None, True, [], {}, [[]], [1e308, 1e308], [-1, 2]]


def paths(doc, prefix=()):
    """Every (path, value) in the document."""
    yield prefix, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, prefix + (i,))


def set_at(doc, path, value):
    if not path:
        return value
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return doc


def mutate(text, doc, rng):
    """One mutated file text."""
    kind = rng.randrange(7)
    if kind == 0:  # truncate
        return text[:rng.randrange(len(text))]
    if kind == 1:  # flip bytes
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return b.decode("latin-1")
    d = copy.deepcopy(doc)
    all_paths = [p for p, _ in paths(d) if p]
    path = rng.choice(all_paths)
    if kind == 2:  # replace a value
        d = set_at(d, path, copy.deepcopy(rng.choice(EXTREMES)))
    elif kind == 3:  # remove a key or list entry
        parent = d
        for p in path[:-1]:
            parent = parent[p]
        del parent[path[-1]]
    elif kind == 4:  # scale a number
        nums = [p for p, v in paths(d) if isinstance(v, float)]
        if nums:
            p = rng.choice(nums)
            v = [v for q, v in paths(d) if q == p][0]
            d = set_at(d, p, v * rng.choice([-1, 0, 1e300, 1e-300, 2, 1 + 1e-15]))
    elif kind == 5:  # duplicate names / mismatched counts
        if "feature_names" in d and d["feature_names"]:
            d["feature_names"] = [d["feature_names"][0]] * (
                len(d["feature_names"]) + rng.choice([0, 1, -1]))
        for key in ("n_components", "n_modes", "n_features", "lags"):
            if key in d and rng.random() < 0.5:
                d[key] = rng.choice([0, 1, 3, 1000000, 2**62, -1])
    else:  # a special JSON number in the text
        t = json.dumps(d)
        nums = [p for p, v in paths(d) if isinstance(v, float)]
        if nums:
            d = set_at(d, rng.choice(nums), "@@")
            t = json.dumps(d).replace('"@@"', rng.choice(
                ["NaN", "Infinity", "-Infinity", "1e999", "-0", "1e-999"]))
        return t
    return json.dumps(d, indent=1)


DATA_FOR = {"eruptions": "faithful.csv", "sepal_length": "iris.csv",
            "growth_pct": "gdp_growth.csv", "logret_pct": "dax_returns.csv"}


def commands(lsefit, data, kind, model, names):
    """The reader's two ways in: a data file the unchanged model fits, and
    no data at all."""
    csv = os.path.join(data, DATA_FOR[names[0]])
    if kind == "gmm":
        return [[lsefit, "gmm", "predict", model, csv, "-q"],
                [lsefit, "gmm", "sample", model, "-n", "3", "--seed", "1", "-q"]]
    return [[lsefit, "slds", "segment", model, csv, "-q"],
            [lsefit, "slds", "simulate", model, "-T", "5", "--seed", "1", "-q"]]


def check(cmd, model, must_accept):
    """None when the run behaves, else what went wrong."""
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120)
    except subprocess.TimeoutExpired:
        return "no answer within 120 s"
    err = r.stderr.decode("utf-8", "replace")
    out = r.stdout.decode("utf-8", "replace")
    if "Sanitizer" in err or "runtime error" in err:
        return "sanitizer: " + err[:400]
    if r.returncode == 0:
        if "nan" in out.lower():
            return "exit 0 with nan in the output"
        return None
    if must_accept:
        return f"the unchanged model is refused (exit {r.returncode}): {err[:300]}"
    if r.returncode < 0:
        return f"killed by signal {-r.returncode}"
    if r.returncode == 2:  # usage error: a data file the model does not fit
        return None if err.startswith("lsefit: ") else f"usage: {err[:300]}"
    if r.returncode != 1:
        return f"exit {r.returncode}: {err[:300]}"
    lines = err.rstrip("\n").split("\n")
    if not err.startswith("lsefit: "):
        return f"message does not start with 'lsefit: ': {err[:300]}"
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr: {err[:300]}"
    return None


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    lsefit, data, corpus = (os.path.abspath(a) for a in sys.argv[1:4])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    seeds = sorted(f for f in os.listdir(corpus) if f.endswith(".json"))
    tmp = tempfile.mkdtemp(prefix="lsefit-fuzz-models.")
    fails = 0
    try:
        for i, name in enumerate(seeds, 1):
            kind = "gmm" if name.startswith("gmm") else "slds"
            text = open(os.path.join(corpus, name), encoding="utf-8").read()
            doc = json.loads(text)
            rng = random.Random(f"{seed}:{name}")
            model = os.path.join(tmp, "model.json")
            problems = []
            for m in range(n + 1):
                mutated = text if m == 0 else mutate(text, doc, rng)
                with open(model, "w", encoding="latin-1",
                          errors="replace") as fh:
                    fh.write(mutated)
                for cmd in commands(lsefit, data, kind, model,
                                    doc["feature_names"]):
                    what = check(cmd, model, m == 0)
                    if what:
                        problems.append((m, " ".join(cmd[1:3]), what,
                                         mutated[:200]))
                if len(problems) >= 3:
                    break
            if problems:
                fails += 1
                print(f"not ok {i} - {name}: {n} mutations")
                for m, cmd, what, mutated in problems:
                    print(f"# mutation {m}, {cmd}: {what}")
                    print("#   file: " + mutated.replace("\n", " "))
            else:
                print(f"ok {i} - {name}: {n} mutations")
    finally:
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)
    print(f"1..{len(seeds)}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
