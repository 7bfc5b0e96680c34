#!/usr/bin/env python3
"""check_docs.py -- the documents' shell examples, run as a reader would.

The fenced ```sh blocks of README.md, docs/security.md, docs/operations.md
and docs/deploy.md run in that order, each document in one bash of its own,
in one working directory, against a cluster this test starts: four
mkv-volumes (3001-3004: operations.md's rebalance takes one out) and a
master on 3000 with -db /tmp/indexdb/, and for security.md a master with -keys, the keys file
being the document's own ```text file=/etc/mkv/keys block.

Rewritten on the way, and nothing else: host:300N (localhost, 127.0.0.1,
master, m1) to the ports the test took; /tmp/, /etc/mkv/ and /srv/mkv/ to
the test's directory.  bin/, tools/ and deploy/ are links to the build and
the checkout; `make` runs in the checkout (the .deb lands in the working
directory); `systemctl stop|start|restart|reload mkv` acts on the
document's master; curl, as written, also dumps its headers for the check.

A command's trailing comment that states an answer is checked: `# 201`
(a curl's final HTTP status), `# exit 1` (the exit status; otherwise 0),
`# exit 1: "what it says"` (also printed), `# {"next":...}` (the JSON
curl prints).  A ```text output block after a
```sh block lists lines its last command must print.  A block that cannot
run here says so: ```sh skip: the reason (printed as SKIP).  A fence with
no language in these documents fails: each is run, skipped, or another
language (text, nginx, yaml, python).  Also checked: every docs/X.md that
README.md, docs/ and man/ name, and every markdown link, exists.

Prints ok/FAIL/SKIP per check, exits 1 on any FAIL.  MKV_ROOT: the
checkout; MKV_BIN: its binaries (build-san/bin: the sanitizer build, and
`make` gets SANITIZE=1).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.environ.get("MKV_ROOT", os.path.join(os.path.dirname(__file__), "..")))
BIN = os.path.abspath(os.environ.get("MKV_BIN", os.path.join(ROOT, "bin")))
DOCS = ["README.md", "docs/security.md", "docs/operations.md", "docs/deploy.md"]
LANGS = {"sh", "text", "nginx", "yaml", "python", "c", "json"}

failed = False


def ok(msg):
    print("ok   " + msg, flush=True)


def fail(msg, detail=""):
    global failed
    failed = True
    print("FAIL " + msg, flush=True)
    for line in detail.rstrip("\n").split("\n") if detail else []:
        print("     " + line)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def blocks(path):
    """(line, lang, attrs, lines) of every fenced block of path."""
    out, cur = [], None
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if cur is None:
                m = re.match(r"^```\s*(\S*)\s*(.*)$", line)
                if m:
                    cur = (n, m.group(1), m.group(2).strip(), [])
            elif re.match(r"^```\s*$", line):
                out.append(cur)
                cur = None
            else:
                cur[3].append(line)
    return out


def comment_of(cmd):
    """The command without its trailing `# comment` (a # that starts a
    word outside quotes), and the comment."""
    q = None
    for i, c in enumerate(cmd):
        if q:
            if c == q and not (q == '"' and cmd[i - 1] == "\\"):
                q = None
        elif c in "'\"":
            q = c
        elif c == "#" and (i == 0 or cmd[i - 1] in " \t"):
            return cmd[:i].rstrip(), cmd[i + 1:].strip()
    return cmd, ""


def commands(lines):
    """The block's commands: continued lines joined, a heredoc kept whole,
    comment lines dropped.  Each is (text, comment)."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + "\n" + lines[i]
            i += 1
        text, comment = comment_of(line)
        m = re.search(r"<<-?\s*'?(\w+)'?", text)
        if m:
            body = []
            while i < len(lines) and lines[i].strip() != m.group(1):
                body.append(lines[i])
                i += 1
            text += "\n" + "\n".join(body + [m.group(1)])
            i += 1
        out.append((text, comment))
    return out


class Cluster:
    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []
        self.vports = [free_port() for _ in range(5)]   # 3001-3004, and -keys' own
        self.ports = {"3000": free_port(), "3000k": free_port()}
        for i, p in enumerate(self.vports[:4]):
            self.ports[str(3001 + i)] = p
        for i, p in enumerate(self.vports):
            d = os.path.join(tmp, "vol%d" % i)
            os.makedirs(d)
            log = open(d + ".log", "w")
            self.procs.append(subprocess.Popen([os.path.join(BIN, "mkv-volume"), "-port", str(p), d],
                                               stdout=log, stderr=log))
        for p in self.vports:
            wait_port(p)

    def vols(self, idx):
        return ",".join("127.0.0.1:%d" % self.vports[i] for i in idx)

    def stop(self):
        for pidfile in ("master.pid", "keys.pid"):
            try:
                pid = int(open(os.path.join(self.tmp, pidfile)).read())
                os.kill(pid, signal.SIGTERM)
                wait_gone(pid)
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.terminate()
            if p.wait(timeout=60) != 0:
                fail("mkv-volume %s exited %d on SIGTERM" % (p.args[2], p.returncode))
        # the servers' logs hold no sanitizer report (SANITIZE=1)
        for name in sorted(os.listdir(self.tmp)):
            if name.endswith(".log"):
                text = open(os.path.join(self.tmp, name), errors="replace").read()
                for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                            "SUMMARY: UndefinedBehaviorSanitizer"):
                    if bad in text:
                        fail("%s: %s" % (name, bad), text[text.index(bad) - 200:][:3000])


def wait_port(port, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("FAIL nothing listens on port %d" % port)


def wait_gone(pid, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.05)


PRELUDE = r'''
unset MAKEFLAGS MFLAGS MAKELEVEL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE
export AWS_CONFIG_FILE=/nonexistent AWS_SHARED_CREDENTIALS_FILE=/nonexistent
make() { command make -C "$MKV_ROOT" --no-print-directory $MKV_SAN DEBDIR="$PWD" "$@"; }
curl() { command curl -D "$MKV_HDR" "$@"; }
# the document's master: started once, and by systemctl start
mkv_up() {
	if [ -s "$MKV_PID" ] && kill -0 "$(cat "$MKV_PID")" 2>/dev/null; then return 0; fi
	"$MKV_BIN/mkv" $MKV_MASTER server >>"$MKV_LOG" 2>&1 &
	echo $! >"$MKV_PID"
	for i in $(seq 600); do
		command curl -s -o /dev/null "http://127.0.0.1:$MKV_PORT/" && return 0
		kill -0 "$(cat "$MKV_PID")" 2>/dev/null || break
		sleep 0.05
	done
	echo "the master did not start: $MKV_LOG" >&2; return 1
}
mkv_down() {
	p=$(cat "$MKV_PID" 2>/dev/null) || return 0
	kill -TERM "$p" 2>/dev/null
	while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	: >"$MKV_PID"
}
systemctl() {
	case "$*" in
	"stop mkv") mkv_down ;;
	"start mkv") mkv_up ;;
	"restart mkv") mkv_down && mkv_up ;;
	"reload mkv") kill -HUP "$(cat "$MKV_PID")" ;;
	*) echo "systemctl $*: not in this test (mark the example: sh skip: why)" >&2; return 1 ;;
	esac
}
'''


def rewrite(text, ports, tmp):
    def port(m):
        return "127.0.0.1:%d" % ports[m.group(2)]
    text = re.sub(r"\b(localhost|127\.0\.0\.1|master|m1):(300\d)\b", port, text)
    text = re.sub(r"(^|[\s=\"'(])/(tmp|etc/mkv|srv/mkv)/", lambda m: m.group(1) + tmp + "/" + m.group(2) + "/", text)
    return text


def run_doc(doc, cluster, tmp, work):
    keyed = doc == "docs/security.md"
    ports = dict(cluster.ports)
    if keyed:
        ports["3000"] = ports["3000k"]
        master = "-volumes %s -replicas 1 -db %s/tmp/keysdb -port %d -keys %s/etc/mkv/keys" % (
            cluster.vols([4]), tmp, ports["3000"], tmp)
    else:
        master = "-volumes %s -db %s/tmp/indexdb/ -port %d" % (cluster.vols([0, 1, 2, 3]), tmp, ports["3000"])
    runs = os.path.join(tmp, "run", os.path.basename(doc))   # each document's own
    os.makedirs(runs)
    script = [PRELUDE]
    checks = []    # (n, where, text, comment, output)
    last = None
    for line, lang, attrs, lines in blocks(doc):
        where = "%s:%d" % (doc, line)
        if lang == "":
            fail("%s: a fence with no language: ```sh (run), ```sh skip: why, or its language" % where)
            continue
        if lang not in LANGS:
            continue
        if lang == "text" and attrs.startswith("file="):
            path = rewrite(" " + attrs[5:], ports, tmp).strip()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            os.chmod(path, 0o600)
            continue
        if lang == "text" and attrs == "output":
            if last is not None:
                checks[last] = checks[last][:4] + ([l for l in lines if l.strip() != "..."],)
            continue
        if lang != "sh":
            continue
        if attrs.startswith("skip"):
            print("SKIP %s: %s" % (where, attrs[4:].lstrip(": ") or "(no reason given)"))
            last = None
            continue
        script.append("mkv_up || exit 99")
        for text, comment in commands(lines):
            n = len(checks)
            checks.append((n, where, text, comment, None))
            last = n
            script.append('MKV_HDR=%s/%d.hdr; : >"$MKV_HDR"\n{\n%s\n} >%s/%d.out 2>%s/%d.err </dev/null\necho $? >%s/%d.rc'
                          % (runs, n, rewrite(text, ports, tmp), runs, n, runs, n, runs, n))
    env = dict(os.environ, MKV_ROOT=ROOT, MKV_BIN=BIN, MKV_MASTER=master, MKV_PORT=str(ports["3000"]),
               MKV_PID=os.path.join(tmp, "keys.pid" if keyed else "master.pid"),
               MKV_LOG=os.path.join(tmp, "keys.log" if keyed else "master.log"),
               MKV_SAN="SANITIZE=1" if BIN.endswith("build-san/bin") else "",
               PATH=BIN + ":" + os.environ["PATH"])
    name = os.path.join(tmp, os.path.basename(doc) + ".sh")
    with open(name, "w") as f:
        f.write("\n".join(script) + "\n")
    if not checks:
        return
    try:
        subprocess.run(["bash", name], cwd=work, env=env, timeout=900, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        fail("%s: its examples did not end within 900 s" % doc)
    for n, where, text, comment, output in checks:
        res = {}
        for k in ("rc", "out", "err", "hdr"):
            try:
                with open("%s/%d.%s" % (runs, n, k), errors="replace") as f:
                    res[k] = f.read()
            except OSError:
                res[k] = None
        short = text.split("\n")[0][:90]
        if res["rc"] is None:
            fail("%s: %s: never ran (an example before it stopped the shell?)" % (where, short))
            continue
        rc = int(res["rc"])
        want_rc, problems = 0, []
        m = re.match(r"exit (\d+)", comment)
        if m:
            want_rc = int(m.group(1))
            said = re.search(r'"(.+?)(?:\.\.\.)?"', comment)
            if said and said.group(1).strip() not in (res["out"] or "") + (res["err"] or ""):
                problems.append("does not say %r" % said.group(1).strip())
        if rc != want_rc:
            problems.append("exit status %d, not %d" % (rc, want_rc))
        m = re.match(r"(\d{3})\b", comment)
        if m and re.search(r"(^|[|;&]\s*)curl\b", text):
            got = re.findall(r"^HTTP/\S+ (\d{3})", res["hdr"] or "", re.M)
            if not got or got[-1] != m.group(1):
                problems.append("answered %s, not %s" % (got[-1] if got else "nothing", m.group(1)))
        if comment[:1] and comment[:1] in "{[":
            try:
                if json.loads(res["out"]) != json.loads(comment):
                    problems.append("printed %s" % res["out"].strip())
            except ValueError:
                problems.append("printed %r, not JSON" % (res["out"] or "")[:200])
        if output:
            have = [l.rstrip() for l in (res["out"] or "").split("\n")]
            missing = [l for l in output if l.rstrip() not in have]
            if missing:
                problems.append("does not print: " + "; ".join(missing))
        if problems:
            fail("%s: %s: %s" % (where, short, ", ".join(problems)),
                 "stdout: " + (res["out"] or "")[-600:] + "\nstderr: " + (res["err"] or "")[-1500:])
        else:
            ok("%s: %s%s" % (where, short, "  # " + comment if comment else ""))


def check_refs():
    """Every docs/X.md named in README.md, docs/*.md and man/*.1, and every
    relative markdown link, exists."""
    files = ["README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")]
    files += ["man/" + f for f in sorted(os.listdir(os.path.join(ROOT, "man")))]
    bad = []
    for name in files:
        text = open(os.path.join(ROOT, name), encoding="utf-8").read().replace("\\-", "-")
        for ref in sorted(set(re.findall(r"\bdocs/[a-z0-9][\w.-]*?\.md\b", text))):
            if not os.path.exists(os.path.join(ROOT, ref)):
                bad.append("%s names %s" % (name, ref))
        # in its prose (not code), a document names no page but others
        prose = re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
        if name in prose:
            bad.append("%s names itself: say which section" % name)
        for ref in sorted(set(re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text))):
            if not os.path.exists(os.path.join(ROOT, os.path.dirname(name), ref)):
                bad.append("%s links to %s" % (name, ref))
    if bad:
        fail("documents name files that do not exist, or themselves", "\n".join(bad))
    else:
        ok("every docs/X.md the README, docs/ and man pages name exists, and every link resolves")


def check_environment():
    """Every variable the code reads (getenv) is in its man page's
    ENVIRONMENT: volume/'s in mkv-volume.1, the rest's in mkv.1."""
    bad = []
    for page, dirs in (("mkv.1", ("master", "common", "ops", "s3")), ("mkv-volume.1", ("volume",))):
        text = open(os.path.join(ROOT, "man", page), encoding="utf-8").read()
        m = re.search(r"^\.SH ENVIRONMENT\n(.*?)^\.SH ", text, re.M | re.S)
        env = m.group(1) if m else ""
        for d in dirs:
            for name in sorted(os.listdir(os.path.join(ROOT, d))):
                if name.endswith((".c", ".h")):
                    src = open(os.path.join(ROOT, d, name), encoding="utf-8").read()
                    for var in sorted(set(re.findall(r'getenv\("(\w+)"\)', src))):
                        if not re.search(r"\b%s\b" % var, env):
                            bad.append("%s/%s reads %s: not in man/%s's ENVIRONMENT" % (d, name, var, page))
    if bad:
        fail("the man pages' ENVIRONMENT sections", "\n".join(bad))
    else:
        ok("every variable the code reads is in its man page's ENVIRONMENT")


def main():
    check_refs()
    check_environment()
    tmp = tempfile.mkdtemp(prefix="mkvdocs.")
    os.chmod(tmp, 0o755)
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    os.symlink(BIN, os.path.join(work, "bin"))
    for d in ("tools", "deploy"):
        os.symlink(os.path.join(ROOT, d), os.path.join(work, d))
    cluster = None
    try:
        cluster = Cluster(tmp)
        for doc in DOCS:
            run_doc(doc, cluster, tmp, work)
    finally:
        if cluster:
            cluster.stop()
        if failed:
            for log in ("master.log", "keys.log"):
                p = os.path.join(tmp, log)
                if os.path.exists(p):
                    print("---- %s (last lines)" % log)
                    print("".join(open(p, errors="replace").readlines()[-30:]))
        if not os.environ.get("MKV_DOCS_KEEP"):   # the temporary tree, to look at
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept " + tmp)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
