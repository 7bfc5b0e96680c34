#!/usr/bin/env python3
"""burst.py MASTER PID ROUNDS N: each round N small PUTs at once (each on a
connection of its own), every acknowledged one read back (GET, following
the 302 to the volume), then N DELETEs at once.  Per round: failures,
slowest request, the master's open fds and RSS.  Exit 1 on a failed
request or an acknowledged write that does not read back."""
import http.client, sys, time, os, urllib.parse
from concurrent.futures import ThreadPoolExecutor
master, pid, rounds, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
host, port = master.split(":")
def req(method, path, body=None, follow=False):
    t = time.time()
    try:
        c = http.client.HTTPConnection(host, int(port), timeout=300)
        c.request(method, path, body=body); r = c.getresponse(); data = r.read(); st = r.status
        loc = r.getheader("Location"); c.close()
        if follow and st == 302:
            u = urllib.parse.urlsplit(loc)
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            c.request("GET", u.path + ("?" + u.query if u.query else "")); r = c.getresponse(); data = r.read(); st = r.status; c.close()
        return st, data, time.time() - t
    except Exception as e:
        return "exc:" + str(e)[:60], b"", time.time() - t
def fds():
    return len(os.listdir("/proc/%d/fd" % pid))
def rss():
    return int([l for l in open("/proc/%d/status" % pid) if l.startswith("VmRSS")][0].split()[1])
bad = 0
with ThreadPoolExecutor(n) as ex:
    for r in range(rounds):
        keys = ["burst-%d-%d" % (r, i) for i in range(n)]
        puts = list(ex.map(lambda k: req("PUT", "/" + k, b"v-" + k.encode()), keys))
        acked = [k for k, p in zip(keys, puts) if p[0] == 201]
        gets = list(ex.map(lambda k: req("GET", "/" + k, follow=True), acked))
        lost = [k for k, g in zip(acked, gets) if g[0] != 200 or g[1] != b"v-" + k.encode()]
        dels = list(ex.map(lambda k: req("DELETE", "/" + k), keys))
        fails = [p[0] for p in puts if p[0] != 201] + [d[0] for d in dels if d[0] not in (204, 404)]
        slow = max(x[2] for x in puts + dels)
        print("round %d: %d PUT ok, %d failed %s, %d acked unreadable %s, slowest %.1f s, fds %d, rss %d kB"
              % (r, len(acked), len(fails), sorted(set(map(str, fails)))[:4], len(lost),
                 [(k, g[0]) for k, g in zip(acked, gets) if k in lost][:3], slow, fds(), rss()), flush=True)
        bad += len(fails) + len(lost)
sys.exit(1 if bad else 0)
