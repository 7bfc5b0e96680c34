#!/usr/bin/env python3
"""mutate.py -- mutation testing (`make mutate`, docs/testing.md).

Each mutant of tests/mutants.txt is one small bug: a file, a text that must
occur in it exactly once, what replaces it, and the suites (check's
CK_RUN_CASE narrowing them) that must then fail.  The tree is copied (the
tracked and untracked, not ignored, files: what would be committed) to a
temporary directory and built there once; then each mutant in turn is
written into the copy, only the binaries its suites run are rebuilt, the
suites run until one fails, and the file is put back.  The checkout itself
is never written.

A mutant none of its suites fails is a survivor: a bug the tests let
through, unless the list marks it equivalent (no test can see it: the
reason is given).  A mutant whose text no longer occurs exactly once is
"gone" (the code moved: rewrite it) and not counted.

Environment:
  MUTANTS=regex     only the mutants whose name or file matches
  MUTATE_JOBS=N     mutants at once, each in a copy of its own (default: the
                    cores when the machine is idle, else 1)
  MUTATE_TIMEOUT=S  a suite that runs longer is stopped, and the mutant
                    counted killed ("timeout"); default 600
  MUTATE_KEEP=1     keep the copies (their path is printed)
  MUTATE_LIST=file  another list (default tests/mutants.txt)

`tools/mutate.py --check` only checks the list against the tree (no
build): which mutants are gone.

Exit status: 0 when every survivor is a listed equivalent and every
mutant builds; 1 otherwise; 2 for a bad list or a baseline that fails.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Mutant:
    def __init__(self, name, path, suites, line):
        self.name, self.path, self.suites, self.line = name, path, suites, line
        self.old, self.new, self.equivalent = [], [], None
        self.result, self.detail, self.secs = None, "", 0.0


def parse(listfile):
    """The list's format (see its head): "@ NAME FILE SUITE[:CASE]..."
    (a case with blanks in quotes),
    then "- " lines (the text, joined by newlines), "+ " lines (its
    replacement; a bare "+" for an empty one), "= reason" for an
    equivalent.  "#" starts a comment line."""
    out, cur, errors = [], None, []
    with open(listfile) as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith("@ "):
                f_ = shlex.split(line[2:])
                if len(f_) < 3:
                    errors.append("%s:%d: want @ NAME FILE SUITE..." % (listfile, n))
                    continue
                cur = Mutant(f_[0], f_[1], f_[2:], n)
                out.append(cur)
            elif cur is None:
                errors.append("%s:%d: text before the first @ line" % (listfile, n))
            elif line.startswith("- ") or line == "-":
                cur.old.append(line[2:])
            elif line.startswith("+ ") or line == "+":
                cur.new.append(line[2:])
            elif line.startswith("= "):
                cur.equivalent = line[2:]
            else:
                errors.append("%s:%d: a line starts with @, -, +, = or #" % (listfile, n))
    names = set()
    for m in out:
        if not m.old or not m.new:
            errors.append("%s:%d: %s: no - or + line" % (listfile, m.line, m.name))
        if m.name in names:
            errors.append("%s:%d: %s: the name is used twice" % (listfile, m.line, m.name))
        names.add(m.name)
        for s in m.suites:
            if not os.path.exists(os.path.join(ROOT, "tests", s.split(":")[0] + ".c")):
                errors.append("%s:%d: %s: no suite tests/%s.c" % (listfile, m.line, m.name, s))
        if not os.path.exists(os.path.join(ROOT, m.path)):
            errors.append("%s:%d: %s: no file %s" % (listfile, m.line, m.name, m.path))
    return out, errors


def copy_tree(dst):
    """What git would commit, untracked files included, into dst."""
    files = subprocess.run(["git", "-c", "safe.directory=*", "ls-files", "-z", "--cached",
                            "--others", "--exclude-standard"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout.decode().split("\0")
    for rel in files:
        src = os.path.join(ROOT, rel)
        if not rel or not os.path.lexists(src):
            continue
        os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), os.path.join(dst, rel))
        else:
            shutil.copy2(src, os.path.join(dst, rel))
    # no .git in the copy: tools/version.sh reads this instead
    with open(os.path.join(dst, "VERSION"), "w") as f:
        f.write("0.0~mutate unknown\n")


def make(tree, targets, jobs):
    p = subprocess.run(["make", "-s", "-j%d" % jobs] + targets, cwd=tree,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode == 0, p.stdout.decode(errors="replace")


def targets_of(suites):
    """What the suites run: the daemons, the suites, and the shims they
    preload (build/tests/NAME.so, of tests/NAME.c that is no suite)."""
    shims = ["build/tests/%s.so" % f[:-2] for f in sorted(os.listdir(os.path.join(ROOT, "tests")))
             if f.endswith(".c") and not f.startswith("check_") and f != "harness.c"]
    return ["bin/mkv", "bin/mkv-volume"] + shims + sorted({"build/tests/" + s.split(":")[0]
                                                           for s in suites})


def run_suite(tree, suite, timeout):
    """(passed, what): the suite, narrowed to its case when given."""
    name, _, case = suite.partition(":")
    env = dict(os.environ, MKV_BIN=os.path.join(tree, "bin"), MKV_ROOT=tree)
    env.pop("CK_RUN_SUITE", None)
    env.pop("CK_RUN_CASE", None)
    if case:
        env["CK_RUN_CASE"] = case
    p = subprocess.Popen([os.path.join(tree, "build/tests", name)], cwd=tree, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    with RUNNING_LOCK:
        RUNNING.add(p)
    try:
        out = p.communicate(timeout=timeout)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        stop_group(p)
        return False, "timeout"
    finally:
        with RUNNING_LOCK:
            RUNNING.discard(p)
    if p.returncode == 0 and re.search(r"Checks: [1-9]", out):
        return True, ""
    if p.returncode == 0:   # a case name that matches nothing runs nothing
        return None, "ran no test (is the case %r there?)" % case
    lines = [l for l in out.splitlines() if ":F:" in l or ":E:" in l]
    lines = lines or [l for l in out.strip().splitlines() if not l.startswith("Running suite")][-1:]
    return False, lines[0][:200] if lines else "exit %d" % p.returncode


RUNNING, RUNNING_LOCK = set(), threading.Lock()


def stop_group(p):
    """A suite and what it started (its own session): killed, reaped."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    p.wait()


def source(tree, m):
    with open(os.path.join(tree, m.path)) as f:
        return f.read()


def try_mutant(tree, m, timeout):
    old, new = "\n".join(m.old), "\n".join(m.new)
    path = os.path.join(tree, m.path)
    text = source(tree, m)
    count = text.count(old)
    if count != 1:
        m.result, m.detail = "gone", "the text occurs %d times" % count
        return
    t0 = time.time()
    try:
        with open(path, "w") as f:
            f.write(text.replace(old, new))
        ok, out = make(tree, targets_of(m.suites), 1)
        if not ok:
            errs = [l for l in out.splitlines() if "error" in l] or out.strip().splitlines() or [""]
            m.result, m.detail = "nobuild", errs[0][:200]
            return
        m.result = "survived"
        for s in m.suites:
            passed, what = run_suite(tree, s, timeout)
            if passed is None:
                m.result, m.detail = "error", "%s %s" % (s, what)
                return
            if not passed:
                m.result, m.detail = "killed", "%s: %s" % (s, what)
                return
    finally:
        with open(path, "w") as f:   # a new mtime: the next make rebuilds it
            f.write(text)
        m.secs = time.time() - t0


def main():
    t_start = time.time()
    listfile = os.environ.get("MUTATE_LIST", os.path.join(ROOT, "tests/mutants.txt"))
    mutants, errors = parse(listfile)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    if sys.argv[1:] == ["--check"]:   # the list only: is each text still there once?
        gone = 0
        for m in mutants:
            n = source(ROOT, m).count("\n".join(m.old))
            if n != 1:
                gone += 1
                print("gone %s (%s:%d, %s): the text occurs %d times" % (m.name, listfile, m.line,
                                                                       m.path, n))
        print("mutate --check: %d mutants, %d gone" % (len(mutants), gone))
        return 1 if gone else 0
    pat = os.environ.get("MUTANTS")
    if pat:
        mutants = [m for m in mutants if re.search(pat, m.name) or re.search(pat, m.path)]
    if not mutants:
        print("mutate: no mutant matches MUTANTS=%s" % pat, file=sys.stderr)
        return 2
    ncpu = os.cpu_count() or 1
    idle = os.getloadavg()[0] < 0.5 * ncpu
    jobs = int(os.environ.get("MUTATE_JOBS") or (ncpu if idle else 1))
    jobs = max(1, min(jobs, len(mutants)))
    timeout = int(os.environ.get("MUTATE_TIMEOUT", "600"))
    keep = os.environ.get("MUTATE_KEEP") == "1"
    # SIGTERM as Ctrl-C: the copies are removed, the suites running stopped
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    top = tempfile.mkdtemp(prefix="mkv-mutate.")
    queue, lock, done = list(mutants), threading.Lock(), [0]
    trees = [os.path.join(top, "tree%d" % i) for i in range(jobs)]
    suites = sorted({s for m in mutants for s in m.suites})
    print("mutate: %d mutants, %d at a time, copies in %s" % (len(mutants), jobs, top), flush=True)
    try:
        for t in trees:
            copy_tree(t)
        # one full build, then the other copies get its build
        ok, out = make(trees[0], targets_of(suites), ncpu)
        if not ok:
            print(out, file=sys.stderr)
            print("mutate: the unmutated copy does not build", file=sys.stderr)
            return 2
        for t in trees[1:]:
            for d in ("bin", "build"):
                shutil.copytree(os.path.join(trees[0], d), os.path.join(t, d), symlinks=True)
        # the baseline: every suite passes unmutated
        for s in suites:
            passed, what = run_suite(trees[0], s, timeout)
            if not passed:
                print("mutate: %s fails on the unmutated tree: %s" % (s, what), file=sys.stderr)
                return 2
        print("mutate: baseline (%d suites and cases) passed in %.0f s" %
              (len(suites), time.time() - t_start), flush=True)

        def worker(tree):
            while True:
                with lock:
                    if not queue:
                        return
                    m = queue.pop(0)
                try_mutant(tree, m, timeout)
                with lock:
                    done[0] += 1
                    print("[%d/%d] %-8s %-28s %s %s (%.0f s)%s" %
                          (done[0], len(mutants), m.result, m.name, m.path, " ".join(m.suites),
                           m.secs, ": " + m.detail if m.detail else ""), flush=True)

        threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in trees]
        for th in threads:
            th.start()
        for th in threads:
            while th.is_alive():   # a timed join: signals reach the main thread
                th.join(1)
    except KeyboardInterrupt:
        with lock:
            queue.clear()   # the workers take nothing more
        with RUNNING_LOCK:
            for p in list(RUNNING):
                stop_group(p)
        print("mutate: interrupted", file=sys.stderr)
        return 130
    finally:
        if keep:
            print("mutate: kept %s" % top)
        else:
            shutil.rmtree(top, ignore_errors=True)

    by = {}
    for m in mutants:
        by.setdefault(m.result, []).append(m)
    killed, survived = by.get("killed", []), by.get("survived", [])
    applied = len(killed) + len(survived)
    bad = [m for m in survived if not m.equivalent]
    print("\n== mutants: %d applied, %d killed, %d survived (%d listed equivalent), %d gone, "
          "%d do not build, %d errors" % (applied, len(killed), len(survived),
                                         len(survived) - len(bad), len(by.get("gone", [])),
                                         len(by.get("nobuild", [])), len(by.get("error", []))))
    for m in survived:
        print("   survived %s (%s; tests/mutants.txt:%d): %s -> %s%s" %
              (m.name, m.path, m.line, " / ".join(m.old).strip(), " / ".join(m.new).strip(),
               "\n      equivalent: " + m.equivalent if m.equivalent else ""))
    for kind in ("gone", "nobuild", "error"):
        for m in by.get(kind, []):
            print("   %s %s (tests/mutants.txt:%d, %s): %s" % (kind, m.name, m.line, m.path,
                                                             m.detail))
    for m in killed:
        if m.equivalent:
            print("   killed, yet listed equivalent: %s (line %d)" % (m.name, m.line))
    if applied:
        print("== kill rate %.1f %% (%d of %d); %d s in all" %
              (100.0 * len(killed) / applied, len(killed), applied, time.time() - t_start))
    return 1 if bad or by.get("nobuild") or by.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
