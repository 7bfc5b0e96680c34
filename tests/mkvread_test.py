#!/usr/bin/python3
"""tools/mkvread.py against a running cluster.  Run by tests/check_mkvread.c.
Usage: mkvread_test.py MASTER_URL WORKDIR VOLUME_PID...
The master runs -volumesecret, -linkttl 2s, -maxlinkttl 1h and -replicas 2
on the volumes whose pids are given; the last test SIGKILLs the first.
Exits non-zero on the first failure, naming it.  Debian's python3 alone."""
import hashlib, http.client, json, os, signal, socket, subprocess, sys, threading, time, urllib.parse

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import mkvread  # noqa: E402

MASTER, WORK, PIDS = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]
NKEYS = 400


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def req(method, url, body=None):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.netloc, timeout=60)
    c.request(method, u.path + ("?" + u.query if u.query else ""), body=body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def value(i):
    """Key i's bytes: its own, of sizes from 1 B to ~70 KB."""
    seed = hashlib.sha256(b"%d" % i).digest()
    return (seed * (1 + (i * 7919) % 2200))[: 1 + (i * 7919) % 70000]


def key(i):
    return "/ds/%04d" % i if i % 50 else "/ds/%04d <&>" % i   # some need escaping


def url(k):
    return MASTER + urllib.parse.quote(k.encode())


DATA = {key(i): value(i) for i in range(NKEYS)}


def populate():
    for k, v in DATA.items():
        st, body = req("PUT", url(k), v)
        check(st == 201, "PUT %s: %d %s" % (k, st, body))


def listing(q):
    st, body = req("GET", MASTER + q)
    return st, (json.loads(body) if st == 200 else body)


def test_curl():
    """The listing's URLs, signed, work with curl; paged like ?list."""
    st, doc = listing("/ds/?list&locations&ttl=10m&limit=5")   # not -linkttl 2s: a loaded machine
    check(st == 200, "?list&locations: %d" % st)
    check(len(doc["keys"]) == 5 and len(doc["locations"]) == 5 and doc["next"] == key(5),
          "a page of 5: %s" % doc)
    st, plain = listing("/ds/?list&limit=5")
    check(plain["keys"] == doc["keys"], "the keys are ?list's")
    for k, urls in zip(doc["keys"], doc["locations"]):
        check(len(urls) == 2, "%s: 2 replicas, %s" % (k, urls))
        for u in urls:
            check("md5=" in u and "expires=" in u, "not signed: %s" % u)
            p = subprocess.run(["curl", "-sf", u], capture_output=True, timeout=60)
            check(p.returncode == 0 and p.stdout == DATA[k], "curl %s: rc %d" % (u, p.returncode))
    st, doc = listing("/ds/?list&locations&md5s&limit=2")
    check(doc["md5s"] == [hashlib.md5(DATA[k]).hexdigest() for k in doc["keys"]], "md5s")


def test_rules():
    """Combinations that are not ?list&locations's: 400; the ttl cap."""
    for q in ("/ds/?unlinked&locations", "/ds/?list&ttl=1m", "/ds/?list&md5s",
              "/ds/?list&locations&ttl=2h", "/ds/?list&locations&ttl=0s",
              "/ds/?list&locations&limit=0"):
        st, body = listing(q)
        check(st == 400, "%s: %d, not 400" % (q, st))
    st, body = listing("/ds/?list&locations&foo")
    check(st == 200, "an unknown flag beside ?list is ignored, as ?list's")
    try:
        mkvread.Reader(MASTER, "/ds/", ttl="2h").keys()
        check(False, "ttl above -maxlinkttl was granted")
    except mkvread.ListError as e:
        check("400" in str(e) and "maxlinkttl" in str(e), "ListError: %s" % e)
    r = mkvread.Reader(MASTER, "/ds/", ttl="30m")
    check(len(r) == NKEYS, "%d keys" % len(r))
    exp = int(urllib.parse.parse_qs(urllib.parse.urlsplit(r._locs[key(1)][0]).query)["expires"][0])
    check(abs(exp - time.time() - 1800) < 60, "ttl=30m: expires in %d s" % (exp - time.time()))


def read_all(r, what):
    seen = {}
    for k, v in r:
        check(k not in seen, "%s: %s read twice" % (what, k))
        check(v == DATA[k], "%s: %s: %s bytes, not its %d" % (what, k, len(v), len(DATA[k])))
        seen[k] = True
    check(len(seen) == NKEYS, "%s: %d keys read of %d" % (what, len(seen), NKEYS))


def test_read():
    """Every key read once, right, paged listings, get and md5."""
    saved, mkvread.PAGE = mkvread.PAGE, 7
    try:
        r = mkvread.Reader(MASTER, "/ds/", threads=8, ttl="10m", md5=True)
        check(r.keys() == sorted(DATA), "keys, paged by 7: not the keys")
        read_all(r, "paged, md5")
    finally:
        mkvread.PAGE = saved
    r = mkvread.Reader(MASTER, "/ds/", ttl="10m")
    check(r.get(key(50)) == DATA[key(50)], "get")
    check(r.listings == 1, "listed %d times" % r.listings)


def test_fork():
    """A Reader made before a fork (DataLoader workers): each process
    reads on its own connections, every value right."""
    r = mkvread.Reader(MASTER, "/ds/", ttl="10m")
    keys = r.keys()
    check(r.get(keys[0]) == DATA[keys[0]], "get before the fork")   # connections kept
    kids = []
    for n in range(3):
        pid = os.fork()
        if pid == 0:
            ok = all(r.get(k) == DATA[k] for k in keys[n::3])
            os._exit(0 if ok and len(r._lookup(keys[-1]) or []) == 2 else 1)
        kids.append(pid)
    ok = all(r.get(k) == DATA[k] for k in keys[::5])
    for pid in kids:
        _, st = os.waitpid(pid, 0)
        check(os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, "a forked reader failed: %d" % st)
    check(ok, "the parent after the fork")


def test_expired():
    """Links past -linkttl (2 s) answer 410; the reader lists again."""
    r = mkvread.Reader(MASTER, "/ds/")
    r.keys()
    u = r._locs[key(3)][0]
    end = time.time() + 10
    while req("GET", u)[0] != 410:   # polled: expires is in whole seconds
        check(time.time() < end, "a link of -linkttl 2s still works after 10 s")
        time.sleep(0.1)
    read_all(r, "expired links")
    check(r.listings >= 2, "the reader did not list again (%d)" % r.listings)


def test_deleted():
    """A key deleted after the listing: KeyGone naming it, the rest read."""
    k = "/ds/zz-deleted"
    check(req("PUT", url(k), b"soon gone")[0] == 201, "PUT")
    r = mkvread.Reader(MASTER, "/ds/", ttl="10m", errors="yield")
    check(k in r.keys(), "listed")
    check(req("DELETE", url(k))[0] == 204, "DELETE")
    try:
        r.get(k)
        check(False, "get of a deleted key gave bytes")
    except mkvread.KeyGone as e:
        check(e.key == k and k in str(e), "KeyGone: %s" % e)
    got = dict(r.items())
    check(isinstance(got[k], mkvread.KeyGone), "yielded %r" % got[k])
    del got[k]
    check(got == DATA, "the others")
    r = mkvread.Reader(MASTER, "/ds/", ttl="10m")
    r.keys()
    r._keys.append(k)     # as if listed before the DELETE: the last key
    n = 0
    try:
        for _ in r:
            n += 1
        check(False, "errors=raise went past a deleted key")
    except mkvread.KeyGone as e:
        check(e.key == k and n == NKEYS, "raised at %d: %s" % (n, e))


def test_cli():
    out = os.path.join(WORK, "cli")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "mkvread.py"), "-threads",
                        "4", MASTER, "/ds", out], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "mkvread.py: %d %s" % (p.returncode, p.stderr))
    for k, v in DATA.items():
        with open(os.path.join(out, k[len("/ds/"):]), "rb") as f:
            check(f.read() == v, "cli: %s" % k)
    check(req("PUT", url("/cli/ok"), b"ok")[0] == 201, "PUT")
    check(req("PUT", MASTER + "/cli/a/%2E%2E/b", b"up")[0] == 201, "PUT ..")
    out = os.path.join(WORK, "cli2")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "mkvread.py"), MASTER,
                        "/cli", out], capture_output=True, text=True, timeout=300)
    check(p.returncode == 1 and "/cli/a/../b: not a safe file name" in p.stderr, p.stderr)
    check(os.listdir(out) == ["ok"] and not os.path.exists(os.path.join(WORK, "b")),
          "cli wrote %s" % os.listdir(out))


KEYS = {"writer": "6d6b7672656164776b657930303031", "trainer": "6d6b7672656164746b657930303032",
        "lister": "6d6b767265616c6c6b657930303033"}   # tests/check_mkvread.c's


def test_keys():
    """A master with -keys: the listing signed with SigV4 by the key the
    environment (or credentials=) names; a key without read, or none, is
    refused with a clear ListError."""
    km = os.environ["MKV_KEYS_MASTER"]
    netloc = urllib.parse.urlsplit(km).netloc
    data = {"/ks/%03d" % i: value(i) for i in range(40)}
    data["/ks/a b&c"] = b"escaped"
    for k, v in data.items():
        target = urllib.parse.quote(k.encode())
        c = http.client.HTTPConnection(netloc, timeout=60)
        c.request("PUT", target, body=v,
                  headers=mkvread.sigv4_headers("PUT", netloc, target, "writer", KEYS["writer"]))
        r = c.getresponse()
        body = r.read()
        c.close()
        check(r.status == 201, "signed PUT %s: %d %s" % (k, r.status, body))
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.pop(k, None)
    for cred, status in ((None, "401"), (("lister", KEYS["lister"]), "403"),
                         (("trainer", "0" * 30), "401")):
        try:
            mkvread.Reader(km, "/ks/", credentials=cred).keys()
            check(False, "listed with %s" % (cred,))
        except mkvread.ListError as e:
            check(" %s " % status in str(e), "%s: %s" % (cred, e))
    r = mkvread.Reader(km, "/ks/", threads=4, credentials=("trainer", KEYS["trainer"]))
    got = dict(r.items())
    check(got == data, "read with the trainer key: %d of %d keys right" %
          (sum(got.get(k) == v for k, v in data.items()), len(data)))
    os.environ.update(AWS_ACCESS_KEY_ID="trainer", AWS_SECRET_ACCESS_KEY=KEYS["trainer"])
    try:
        check(mkvread.Reader(km, "/ks/").get("/ks/a b&c") == b"escaped", "get from the environment's key")
        out = os.path.join(WORK, "keys-cli")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "mkvread.py"), km, "/ks",
                            out], capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, "cli with the environment's key: " + p.stderr)
        check(sorted(os.listdir(out)) == sorted(k[4:] for k in data), "cli wrote %s" % os.listdir(out))
    finally:
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.pop(k, None)


def test_volume_killed():
    """SIGKILL one of 3 volumes mid-epoch (2 replicas): every key read
    once, right, no error reaching the caller."""
    r = mkvread.Reader(MASTER, "/ds/", threads=8, ttl="10m")
    seen = 0
    for k, v in r:
        check(v == DATA[k], "%s after the kill" % k)
        seen += 1
        if seen == NKEYS // 4:
            os.killpg(PIDS[0], signal.SIGKILL)   # nginx's workers too
    check(seen == NKEYS, "%d of %d" % (seen, NKEYS))
    check(r._down, "no read met the killed volume")
    read_all(mkvread.Reader(MASTER, "/ds/", threads=8, ttl="10m"), "a volume down")


def test_answers():
    """The module's own HTTP/1.1 reading, against canned answers sent a
    few bytes at a time: chunked (extensions, trailers), to the close, a
    1xx first, kept alive between them; a short body, a bad status line
    and silence fail as http.client's errors and a timeout; a connection
    the server closed while idle is replaced."""
    answers = {
        b"/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5;x=1\r\nhello\r\n6\r\n world\r\n0\r\nT: 1\r\n\r\n",
        b"/cont": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\n"
                  b"Content-Length: 3\r\n\r\nxyz",
        b"/close": b"HTTP/1.0 200 OK\r\n\r\nto the end",
        b"/short": b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        b"/bad": b"garbage\r\n\r\n",
        b"/idle": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    }

    def serve(c):
        buf = b""
        with c:
            while True:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
                while b"\r\n\r\n" in buf:
                    req, _, buf = buf.partition(b"\r\n\r\n")
                    path = req.split()[1]
                    if path == b"/silent":
                        time.sleep(3)
                        return
                    a = answers[path]
                    for i in range(0, len(a), 3):
                        c.sendall(a[i:i + 3])
                    if path in (b"/close", b"/short", b"/bad", b"/idle"):
                        return

    ls = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=lambda: [threading.Thread(target=serve, args=(ls.accept()[0],),
                                                      daemon=True).start() for _ in iter(int, 1)],
                     daemon=True).start()
    p = mkvread._Pool("127.0.0.1:%d" % ls.getsockname()[1], 1)
    check(p.get("/chunked") == (200, b"hello world") and len(p.idle) == 1, "chunked")
    check(p.get("/cont") == (404, b"xyz") and len(p.idle) == 1, "1xx, then a 404 kept alive")
    check(p.get("/close") == (200, b"to the end") and not p.idle, "to the close, not kept")
    for target, err in (("/short", http.client.IncompleteRead),
                        ("/bad", http.client.BadStatusLine), ("/silent", socket.timeout)):
        try:
            p.get(target)
            check(False, "%s gave an answer" % target)
        except err:
            pass
        check(not p.idle, "%s: its connection kept" % target)
    check(p.get("/idle") == (200, b"ok") and len(p.idle) == 1, "idle")
    check(p.get("/chunked") == (200, b"hello world"), "a connection closed while idle")
    ls.close()


populate()
ran = []
for t in (test_answers, test_curl, test_rules, test_read, test_fork, test_expired, test_deleted, test_cli,
          test_keys, test_volume_killed):
    t()
    ran.append(t.__name__)
print("mkvread_test: ran", " ".join(ran), flush=True)
