#!/usr/bin/env python3
"""The model API's one error channel and one constructor shape (issue 12).

Every function of include/lsegraph/models/*.h that returns lse_status takes
`lse_error *err` as its last parameter, except the accessors documented in
docs/architecture.md ("Errors and constructors of models"); every
constructor lse_<model>_new* ends with `lse_<model> **out, lse_error *err`.
Usage: api_shape.py SOURCE_ROOT. Exit 0 when the headers follow the rule,
1 with one line per offending function otherwise.
"""
import glob
import os
import re
import sys

# accessors whose status says everything (docs/architecture.md)
EXEMPT = {
    "lse_gmm_cov_parse", "lse_gmm_get_covariance", "lse_slds_get_weights",
    "lse_slds_get_a", "lse_slds_get_b", "lse_slds_get_beta", "lse_slds_get_cov",
    "lse_slds_get_transition", "lse_slds_get_initial",
}
DECL = re.compile(r"LSE_API\s+lse_status\s+(\w+)\s*\(([^;]*?)\)\s*;", re.S)


def params(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return [" ".join(p.split()) for p in text.split(",")]


def check(root):
    bad = []
    headers = sorted(glob.glob(os.path.join(root, "include", "lsegraph",
                                            "models", "*.h")))
    if not headers:
        return ["no headers under %s/include/lsegraph/models" % root], 0
    n = 0
    for h in headers:
        text = open(h, encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        for m in DECL.finditer(text):
            name, ps = m.group(1), params(m.group(2))
            n += 1
            where = "%s: %s" % (os.path.relpath(h, root), name)
            if name in EXEMPT:
                continue
            if not re.fullmatch(r"lse_error \*\s*\w+", ps[-1]):
                bad.append("%s: last parameter is '%s', not 'lse_error *err'"
                           % (where, ps[-1]))
            if re.search(r"_new(_\w+)?$", name) and not name.endswith(
                    "graph_new"):
                if len(ps) < 2 or not re.fullmatch(r"lse_\w+ \*\*\s*\w+",
                                                   ps[-2]):
                    bad.append("%s: a constructor ends with 'lse_X **out, "
                               "lse_error *err'" % where)
    return bad, n


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad, n = check(root)
    for b in bad:
        print(b)
    if bad:
        return 1
    print("api_shape: %d lse_status functions of the model headers follow "
          "the rule" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
