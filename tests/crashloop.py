#!/usr/bin/env python3
"""crashloop.py -- kill -9 the master, a rebuild and a rebalance at random
points while writes run and the index's disk fills and empties; after each
restart every acknowledged write must read back, and `mkv verify` must
find nothing missing (issue 40).

  tests/crashloop.py [--seconds N | --rounds N] [--seed S] [--no-tmpfs]

A cluster of four volumes, two mkv-volume and two stock nginx, with
-replicas 2; the master's volume list switches between three and four of
them (a rebalance) and between spellings of one address (127.0.0.1 and
localhost).  As root the index sits on an 8 MiB tmpfs in a mount namespace
of the script's own, and a thread fills it to ENOSPC and empties it again
at random.  Each round is one of:
  load       writers PUT, REPLACE and DELETE; the master is killed mid-load
  rebuild    the master killed; `mkv rebuild` killed midway, then run whole
  rebalance  offline: `mkv rebalance` killed midway, then run whole
  online     the master restarted with the new list; an online rebalance
             through it, the master killed midway, then run whole
Every round ends with the master up: each key's value must be one its
acknowledged history allows (exactly the acknowledged one when the last
write to it was answered; the old or the new one, or absent, when a write
got no answer or a 5xx), and verify must exit 0.

`make test` runs a short seeded run (MKV_CRASHLOOP_ROUNDS, default 8);
the long one: tests/crashloop.py --seconds 1800.  Needs MKV_BIN (bin/) and
MKV_ROOT (the checkout), as the other suites."""
import argparse, http.client, os, random, shutil, signal, socket, subprocess
import sys, tempfile, threading, time

BIN = os.environ.get("MKV_BIN", "bin")
ROOT = os.environ.get("MKV_ROOT", ".")


def log(*a):
    print("crashloop:", *a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc=None, secs=20):
    end = time.time() + secs
    while time.time() < end:
        if proc and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


def spawn(argv, logf):
    return subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                            start_new_session=True)


def kill9(p):
    if p and p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            p.kill()
    if p:
        p.wait()


def req(method, port, path, body=None, host="127.0.0.1", timeout=30):
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read()
        return r.status, data, r.getheader("Location")
    finally:
        c.close()


def get_value(port, key):
    st, data, loc = req("GET", port, "/" + key)
    if st in (301, 302, 307):
        u = loc.split("//", 1)[1]
        hp, path = u.split("/", 1)
        h, p = hp.rsplit(":", 1)
        st, data, _ = req("GET", int(p), "/" + path, host=h)
    return st, data


class Cluster:
    def __init__(self, tmp, rng, tmpfs):
        self.tmp, self.rng = tmp, rng
        self.logf = open(os.path.join(tmp, "log"), "ab")
        self.vols = []   # (port, proc, kind, dir)
        for i, kind in enumerate(["mkv", "nginx", "mkv", "nginx"]):
            d = os.path.join(tmp, "vol%d" % i)
            os.makedirs(d)
            self.vols.append([free_port(), None, kind, d])
            self.start_vol(i)
        self.db = os.path.join(tmp, "db")
        os.makedirs(self.db)
        self.tmpfs = tmpfs and self.mount_tmpfs()
        self.port = free_port()
        self.master = None
        self.nvol, self.spell = 3, "127.0.0.1"

    def mount_tmpfs(self):
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", self.db])
        return r.returncode == 0

    def start_vol(self, i):
        port, _, kind, d = self.vols[i]
        if kind == "mkv":
            argv = [os.path.join(BIN, "mkv-volume"), "-port", str(port), d]
        else:
            argv = ["/bin/sh", os.path.join(ROOT, "deploy/nginx/mkv-nginx-volume"),
                    str(port), d]
        self.vols[i][1] = spawn(argv, self.logf)
        if not wait_port(port, self.vols[i][1]):
            raise SystemExit("crashloop: volume %d did not start (see %s/log)" % (i, self.tmp))

    def volumes(self):
        return ",".join("%s:%d" % (self.spell, v[0]) for v in self.vols[:self.nvol])

    def mkv(self, *args):
        return [os.path.join(BIN, "mkv"), "-volumes", self.volumes(), "-replicas", "2"] + \
            list(args)

    def start_master(self):
        for _ in range(50):
            self.master = spawn(self.mkv("-db", self.db, "-port", str(self.port), "server"),
                                self.logf)
            if wait_port(self.port, self.master):
                return
            self.master.wait()
            time.sleep(0.2)   # the port, or the index's LOCK, not yet free
        raise SystemExit("crashloop: the master did not start (see %s/log)" % self.tmp)

    def kill_master(self):
        kill9(self.master)
        self.master = None

    def run(self, argv, kill_after=None):
        """Run an ops command; with kill_after, SIGKILL it then (None: to the end)."""
        p = spawn(argv, self.logf)
        if kill_after is None:
            return p.wait()
        try:
            return p.wait(kill_after)
        except subprocess.TimeoutExpired:
            kill9(p)
            return None

    def stop(self):
        self.kill_master()
        for v in self.vols:
            kill9(v[1])
        if self.tmpfs:
            subprocess.run(["umount", "-l", self.db])


class Model:
    """What each key may read as: a set of values (None: absent)."""
    def __init__(self):
        self.allowed, self.lock = {}, threading.Lock()
        self.acked, self.refused, self.unanswered = 0, 0, 0

    def outcome(self, key, new, status, ok):
        with self.lock:
            old = self.allowed.get(key, {None})
            self.refused += status is not None and status >= 500
            self.unanswered += status is None
            if status in ok:
                self.allowed[key] = {new}
                self.acked += 1
            elif status is None or status >= 500:
                self.allowed[key] = old | {new}
            # a 4xx changed nothing

    def current(self, key):
        with self.lock:
            a = self.allowed.get(key, {None})
            return next(iter(a)) if len(a) == 1 else "?"


def writer(cl, model, rng, wid, stop):
    seq, mine = 0, []
    while not stop.is_set():
        seq += 1
        key = rng.choice(mine) if mine and rng.random() < 0.25 else None
        if key is not None and model.current(key) is None:
            key = None
        if key is not None and rng.random() < 0.5:
            method, val, ok = "DELETE", None, (204, 404)
        else:
            if key is None:
                key = "w%d/k%05d" % (wid, seq)
                mine.append(key)
                method = "PUT"
            else:
                method = "REPLACE"
            size = rng.choice([rng.randint(1, 4000), rng.randint(1, 4000),
                               rng.randint(100000, 600000)])
            val = (("%s/%d/" % (key, seq)) * (size // 16 + 1)).encode()[:size]
            ok = (201,)
        st = None
        try:
            st = req(method, cl.port, "/" + key, body=val, timeout=10)[0]
        except (OSError, http.client.HTTPException):
            pass
        model.outcome(key, val, st, ok)
        if st is None:
            time.sleep(0.05)   # the master is down: wait for it


def filler(cl, rng, stop):
    path = os.path.join(cl.db, "filler")
    junk = b"\0" * 65536
    while not stop.is_set():
        time.sleep(rng.uniform(0.2, 1.5))
        try:
            with open(path, "wb") as f:
                while True:
                    f.write(junk)
                    f.flush()
        except OSError:
            pass
        time.sleep(rng.uniform(0.1, 0.8))
        try:
            os.unlink(path)
        except OSError:
            pass
    try:
        os.unlink(path)
    except OSError:
        pass


def check(cl, model, label):
    bad = []
    with model.lock:
        items = list(model.allowed.items())
    # writes may be refused a while after the index's disk emptied: reads not
    for key, allowed in items:
        st, data = get_value(cl.port, key)
        got = data if st == 200 else None if st == 404 else ("status %d" % st)
        if got not in allowed:
            bad.append("%s: reads %s, allowed %s" % (
                key, "absent" if got is None else got if isinstance(got, str)
                else "%d bytes %r" % (len(got), got[:24]),
                ", ".join("absent" if a is None else "%d bytes %r" % (len(a), a[:24])
                          for a in allowed)))
    if bad:
        raise SystemExit("crashloop: after %s, %d of %d keys wrong:\n  %s" % (
            label, len(bad), len(items), "\n  ".join(bad[:20])))
    rc = cl.run(cl.mkv("-master", "127.0.0.1:%d" % cl.port, "verify"))
    if rc != 0:
        raise SystemExit("crashloop: after %s, verify exited %s (see %s/log)" % (
            label, rc, cl.tmp))


def load(cl, model, rng, secs, fill):
    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(cl, model, random.Random(rng.random()),
                                                    w, stop)) for w in range(4)]
    if fill:
        threads.append(threading.Thread(target=filler, args=(cl, random.Random(rng.random()),
                                                            stop)))
    for t in threads:
        t.start()
    return stop, threads


def round_(cl, model, rng, n, fill):
    kind = rng.choice(["load", "load", "rebuild", "rebalance", "online"])
    t = rng.uniform(0.3, 2.5)
    stop, threads = load(cl, model, rng, t, fill)
    time.sleep(t)
    if kind == "load":
        cl.kill_master()
        time.sleep(0.2)
        stop.set()
    else:
        stop.set()
        for th in threads:
            th.join()
        threads = []
        cl.kill_master()
    for th in threads:
        th.join()
    if fill:
        try:
            os.unlink(os.path.join(cl.db, "filler"))
        except OSError:
            pass
    if kind == "rebuild":
        cl.run(cl.mkv("-db", cl.db, "rebuild"), kill_after=rng.uniform(0.05, 1.0))
        rc = cl.run(cl.mkv("-db", cl.db, "rebuild"))
        if rc != 0:
            raise SystemExit("crashloop: rebuild exited %s (see %s/log)" % (rc, cl.tmp))
    elif kind == "rebalance":
        cl.nvol = 7 - cl.nvol
        cl.run(cl.mkv("-db", cl.db, "rebalance"), kill_after=rng.uniform(0.05, 1.0))
        rc = cl.run(cl.mkv("-db", cl.db, "rebalance"))
        if rc != 0:
            raise SystemExit("crashloop: rebalance exited %s (see %s/log)" % (rc, cl.tmp))
    cl.start_master()
    if kind == "online":
        cl.kill_master()
        cl.nvol = 7 - cl.nvol
        cl.start_master()
        p = spawn(cl.mkv("-master", "127.0.0.1:%d" % cl.port, "rebalance"), cl.logf)
        time.sleep(rng.uniform(0.05, 1.0))
        cl.kill_master()
        kill9(p)
        cl.start_master()
        rc = cl.run(cl.mkv("-master", "127.0.0.1:%d" % cl.port, "rebalance"))
        if rc != 0:
            raise SystemExit("crashloop: online rebalance exited %s (see %s/log)" % (rc, cl.tmp))
    check(cl, model, "round %d (%s, %d volumes)" % (n, kind, cl.nvol))
    log("round %d: %s%s, %d keys; so far %d writes acknowledged, %d refused (5xx), "
        "%d unanswered: all kept" % (n, kind, " (disk filling)" if fill else "",
                                     len(model.allowed), model.acked, model.refused,
                                     model.unanswered))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("MKV_CRASHLOOP_ROUNDS", 8)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("MKV_CRASHLOOP_SEED", 1)))
    ap.add_argument("--no-tmpfs", action="store_true")
    ap.add_argument("--same-names", action="store_true",
                    help="always name the volumes 127.0.0.1 (else 127.0.0.1 or localhost, "
                    "at random each round)")
    ap.add_argument("--in-ns", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    tmpfs = not a.no_tmpfs and os.geteuid() == 0
    if tmpfs and not a.in_ns and shutil.which("unshare"):
        # a mount namespace of its own: the tmpfs goes with it
        os.execvp("unshare", ["unshare", "-m", "--propagation", "private", sys.executable,
                              os.path.abspath(__file__), "--in-ns"] + sys.argv[1:])
    if not tmpfs:
        log("SKIPPED the full index disk: needs root (a tmpfs in a mount namespace)")
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="mkvcrash.")
    cl = Cluster(tmp, rng, tmpfs)
    model = Model()
    ok = False
    try:
        cl.start_master()
        n, t0 = 0, time.time()
        while (a.seconds and time.time() - t0 < a.seconds) or (not a.seconds and n < a.rounds):
            n += 1
            if not a.same_names:
                cl.spell = rng.choice(["127.0.0.1", "localhost"])
            round_(cl, model, rng, n, cl.tmpfs and rng.random() < 0.5)
        log("%d rounds in %.0f s (seed %d): every acknowledged write kept, verify clean" % (
            n, time.time() - t0, a.seed))
        ok = True
    finally:
        cl.stop()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log("kept %s for a look" % tmp)


if __name__ == "__main__":
    main()
