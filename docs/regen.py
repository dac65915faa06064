#!/usr/bin/env python3
"""Regenerate or check the command outputs quoted in the documentation.

    docs/regen.py [--check] [--build DIR] [--root DIR] [FILE.md ...]

A quoted output is a fenced block preceded by a marker line:

    <!-- run -->
    ```
    $ lsefit gmm data/faithful.csv -k 2
    Gaussian mixture: K = 2, ...
    ```

Inside the block, a line starting with "$ " starts a command; the lines
after it belong to the command while bash finds it incomplete (an open
quote, a trailing pipe or backslash), the rest up to the next "$ " line is
its output. Regeneration keeps the commands and replaces every output with
what the command prints now (stdout and stderr together, in order).

Marker options, after "run" (space separated):
  mask=REGEX   in the output, every number inside a match of REGEX becomes
               '#' (timings: mask='[0-9.]+ s\\)' gives "(# s)"); several
               mask= allowed.
  drop=REGEX   leave out the output lines that match REGEX (lines whose
               presence depends on the machine's speed, such as lsefit's
               progress lines); the page must say so.
A marker "run hidden: CMD" (no block) runs CMD and quotes nothing: it
prepares files that later blocks of the same page use.

A marker "run raw: CMD" (options before the colon) quotes the output of
CMD as Markdown, between the marker and a line "<!-- end run -->": for
tables a program prints in Markdown. The page's text names the command.

The commands of one page run in order, in one fresh temporary directory
that links every top-level entry of the source tree (data/, models/, ...)
and "build" to the build directory, with the build's tools/ and
examples/ first on PATH, LC_ALL=C and TZ=UTC, and, where the CPU has
AVX2 and FMA, LSE_NO_AVX512=1 and OPENBLAS_CORETYPE=Haswell (the same
kernels, so the same outputs, on every such CPU). Files a command writes
stay in the temporary directory.

Without --check the pages are rewritten in place (after merging changes to
the tools' messages: docs/regen.py --build build). With --check nothing is
written: a page whose regenerated text differs is reported with a unified
diff and the exit status is 1 (meson test -C build --suite docs).
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!--\s*run\b(?P<rest>.*?)-->\s*$")
HIDDEN = re.compile(r"^\s*hidden\s*:\s*(?P<cmd>.*?)\s*$")
RAW = re.compile(r"^\s*raw(?P<opts>\s[^:]*)?:\s*(?P<cmd>.*?)\s*$")
END = re.compile(r"^<!--\s*end run\s*-->\s*$")
TIMEOUT = 600


class DocError(Exception):
    pass


def cpu_has_avx2_fma():
    """1 when /proc/cpuinfo lists avx2 and fma (Linux, x86-64)"""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return "avx2" in flags and "fma" in flags
    except OSError:
        pass
    return False


def parse_opts(text, where):
    masks, drops = [], []
    for tok in re.findall(r"""(\w+=(?:'[^']*'|"[^"]*"|\S+)|\S+)""", text or ""):
        if tok.startswith("mask=") or tok.startswith("drop="):
            rx = tok[5:]
            if rx[:1] in "'\"" and rx[-1:] == rx[:1]:
                rx = rx[1:-1]
            try:
                (masks if tok[0] == "m" else drops).append(re.compile(rx))
            except re.error as e:
                raise DocError(f"{where}: {tok[:4]} '{rx}': {e}")
        else:
            raise DocError(f"{where}: unknown marker option '{tok}' "
                           "(expected mask=REGEX or drop=REGEX)")
    return masks, drops


def complete(cmd):
    """True when bash can parse cmd as a whole command."""
    r = subprocess.run(["bash", "-n", "-c", cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return r.returncode == 0


def split_block(body, where):
    """[(command lines, output lines)] of a block body."""
    items = []
    i = 0
    if body and not body[0].startswith("$ "):
        raise DocError(f"{where}: a marked block must start with a '$ ' "
                       "command line")
    while i < len(body):
        cmd = [body[i]]
        i += 1
        while not complete("\n".join([cmd[0][2:]] + cmd[1:])):
            if i >= len(body):
                raise DocError(f"{where}: command '{cmd[0][2:]}' is not "
                               "complete at the end of the block")
            cmd.append(body[i])
            i += 1
        out = []
        while i < len(body) and not body[i].startswith("$ "):
            out.append(body[i])
            i += 1
        items.append((cmd, out))
    return items


class Runner:
    def __init__(self, root, build):
        self.root, self.build = root, build
        self.tmp = tempfile.mkdtemp(prefix="lsegraph-docs.")
        for name in os.listdir(root):
            if name.startswith(".") or name == "build":
                continue
            os.symlink(os.path.join(root, name), os.path.join(self.tmp, name))
        os.symlink(build, os.path.join(self.tmp, "build"))
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([os.path.join(build, "tools"),
                                       os.path.join(build, "examples"),
                                       env.get("PATH", "/usr/bin:/bin")])
        env["LC_ALL"] = "C"
        env["TZ"] = "UTC"
        # One set of kernels on every x86-64 machine with AVX2 and FMA, so
        # that the quoted outputs do not depend on the CPU: the library's
        # AVX2 copies (not AVX-512, whose sums run over 8 lanes instead of
        # 4) and OpenBLAS's Haswell kernels (not the set OpenBLAS picks
        # for the CPU: its dgemm kernels round differently). Training runs
        # quoted in the pages amplify a last-bit difference into a
        # different printed loss.
        if cpu_has_avx2_fma():
            env["LSE_NO_AVX512"] = "1"
            env["OPENBLAS_CORETYPE"] = "Haswell"
        # stdbuf keeps stdout line-buffered, so stdout and stderr interleave
        # as on a terminal; an ASan runtime must not object to the preload
        asan = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + \
            "verify_asan_link_order=0"
        self.env = env
        self.stdbuf = shutil.which("stdbuf")

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, cmd, where):
        argv = ["bash", "-c", cmd]
        if self.stdbuf:
            argv = [self.stdbuf, "-oL", "-eL"] + argv
        try:
            r = subprocess.run(argv, cwd=self.tmp, env=self.env,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise DocError(f"{where}: '{cmd}' ran longer than {TIMEOUT} s")
        if r.returncode in (126, 127):
            raise DocError(f"{where}: '{cmd}' could not run (status "
                           f"{r.returncode}): {r.stdout.decode(errors='replace')[:300]}")
        text = r.stdout.decode("utf-8", errors="replace")
        return text.split("\n")[:-1] if text.endswith("\n") else \
            (text.split("\n") if text else [])


def mask_lines(lines, masks, drops):
    def hide(m):
        return re.sub(r"[0-9][0-9.]*(?:[eE][-+]?[0-9]+)?", "#", m.group(0))
    lines = [l for l in lines if not any(rx.search(l) for rx in drops)]
    for rx in masks:
        lines = [rx.sub(hide, l) for l in lines]
    return lines


def regen_page(path, runner, rel):
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    n_blocks = 0
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line)
        if not m:
            out.append(line)
            i += 1
            continue
        where = f"{rel}:{i + 1}"
        out.append(line)
        i += 1
        h = HIDDEN.match(m.group("rest"))
        if h:
            if not h.group("cmd"):
                raise DocError(f"{where}: 'run hidden:' needs a command")
            runner.run(h.group("cmd"), where)
            continue
        r = RAW.match(m.group("rest"))
        if r:
            masks, drops = parse_opts(r.group("opts"), where)
            j = i
            while j < len(lines) and not END.match(lines[j]):
                if MARKER.match(lines[j]):
                    raise DocError(f"{where}: 'run raw:' without its "
                                   "'<!-- end run -->' line")
                j += 1
            if j >= len(lines):
                raise DocError(f"{where}: 'run raw:' without its "
                               "'<!-- end run -->' line")
            out.extend(mask_lines(runner.run(r.group("cmd"), where), masks,
                                  drops))
            out.append(lines[j])
            n_blocks += 1
            i = j + 1
            continue
        masks, drops = parse_opts(m.group("rest"), where)
        if i >= len(lines) or not lines[i].startswith("```"):
            raise DocError(f"{where}: the marker must be followed directly "
                           "by a fenced block (```)")
        fence = lines[i]
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if j >= len(lines):
            raise DocError(f"{where}: the fenced block is not closed")
        out.append(fence)
        for cmd, _old in split_block(lines[i + 1:j], where):
            out.extend(cmd)
            text = "\n".join([cmd[0][2:]] + cmd[1:])
            out.extend(mask_lines(runner.run(text, where), masks, drops))
        out.append(lines[j])
        n_blocks += 1
        i = j + 1
    return "\n".join(out), n_blocks


def selftest():
    """The checker itself: drift is found, regeneration fixes it, options
    work, malformed markers are errors."""
    root = tempfile.mkdtemp(prefix="lsegraph-regen-selftest.")
    try:
        os.makedirs(os.path.join(root, "build", "tools"))
        os.makedirs(os.path.join(root, "docs"))
        page = os.path.join(root, "docs", "p.md")
        stale = ("x\n<!-- run hidden: echo 3 > f -->\n"
                 "<!-- run drop='^skip' mask='t=[0-9]+' -->\n```\n"
                 "$ cat f; echo skip me; echo t=42 >&2\nold\n"
                 "$ printf 'a\\n' |\n  tr a b\n```\n"
                 "<!-- run raw: printf '| 1 |\\n' -->\n| 0 |\n"
                 "<!-- end run -->\n")
        want = ("x\n<!-- run hidden: echo 3 > f -->\n"
                "<!-- run drop='^skip' mask='t=[0-9]+' -->\n```\n"
                "$ cat f; echo skip me; echo t=42 >&2\n3\nt=#\n"
                "$ printf 'a\\n' |\n  tr a b\nb\n```\n"
                "<!-- run raw: printf '| 1 |\\n' -->\n| 1 |\n"
                "<!-- end run -->\n")
        with open(page, "w") as fh:
            fh.write(stale)
        me = [sys.executable, os.path.abspath(__file__), "--root", root]
        run = lambda *a: subprocess.run(me + list(a) + [page],
                                        stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        r = run("--check")
        assert r.returncode == 1, ("drift not found", r)
        assert open(page).read() == stale, "check mode wrote the page"
        r = run()
        assert r.returncode == 0, ("regen failed", r)
        got = open(page).read()
        assert got == want, ("regenerated page", got)
        assert run("--check").returncode == 0, "regenerated page drifts"
        for bad in ["<!-- run -->\nno block\n",
                    "<!-- run -->\n```\noutput first\n```\n",
                    "<!-- run bogus -->\n```\n$ true\n```\n",
                    "<!-- run -->\n```\n$ no-such-command-here\n```\n",
                    "<!-- run raw: true -->\nno end\n"]:
            with open(page, "w") as fh:
                fh.write(bad)
            assert run("--check").returncode == 2, ("accepted", bad)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("regen.py: self-test passed", file=sys.stderr)
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare, write nothing, exit 1 on drift")
    ap.add_argument("--root", default=os.path.dirname(here),
                    help="source tree (default: the parent of docs/)")
    ap.add_argument("--build", default=None,
                    help="build directory (default: ROOT/build)")
    ap.add_argument("--exclude", action="append", default=[],
                    metavar="PAGE", help="leave out a page (path from ROOT), "
                    "e.g. docs/energyviz.md in a build without energyviz")
    ap.add_argument("files", nargs="*",
                    help="pages (default: README.md, docs/*.md, docs/models/*.md)")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    build = os.path.abspath(a.build or os.path.join(root, "build"))
    if not os.path.isdir(os.path.join(build, "tools")):
        print(f"regen.py: {build} has no tools/ (build first, or give "
              "--build DIR)", file=sys.stderr)
        return 2
    files = a.files or ([os.path.join(root, "README.md")] +
                        sorted(glob.glob(os.path.join(root, "docs", "*.md"))) +
                        sorted(glob.glob(os.path.join(root, "docs", "models",
                                                      "*.md"))))
    drift, total, failed = 0, 0, 0
    for f in files:
        rel = os.path.relpath(f, root)
        if rel in a.exclude:
            print(f"regen.py: {rel} left out (--exclude)", file=sys.stderr)
            continue
        old = open(f, encoding="utf-8").read()
        if "<!-- run" not in old:
            continue
        runner = Runner(root, build)
        try:
            new, n = regen_page(f, runner, rel)
        except DocError as e:
            print(f"regen.py: {e}", file=sys.stderr)
            failed += 1
            continue
        finally:
            runner.close()
        total += n
        if new == old:
            continue
        if a.check:
            drift += 1
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True),
                f"{rel} (in the tree)", f"{rel} (what the commands print)"))
        else:
            with open(f, "w", encoding="utf-8") as fh:
                fh.write(new)
            print(f"regen.py: rewrote {rel}", file=sys.stderr)
    if failed:
        return 2
    if drift:
        print(f"regen.py: {drift} page(s) quote outputs the commands no "
              "longer print; run docs/regen.py --build BUILD_DIR and review "
              "the diff", file=sys.stderr)
        return 1
    print(f"regen.py: {total} quoted outputs "
          f"{'match' if a.check else 'regenerated'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
