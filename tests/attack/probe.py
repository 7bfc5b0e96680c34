#!/usr/bin/env python3
"""probe.py MASTER SECONDS KEY...: GETs (no redirect follow) of the keys,
round robin on 4 kept-alive connections, and a small PUT + DELETE of a
fresh key every 0.5 s.  Prints per second: GET statuses, max GET ms, PUT
results and the slowest PUT ms."""
import http.client, sys, time, threading, collections
master, secs, keys = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
host, port = master.split(":")
end = time.time() + secs
lock = threading.Lock()
stats = collections.defaultdict(lambda: {"get": collections.Counter(), "getmax": 0.0,
                                         "put": collections.Counter(), "putmax": 0.0})
def sec():
    return int(time.time())
def getter(n):
    c = http.client.HTTPConnection(host, int(port), timeout=120)
    i = n
    while time.time() < end:
        k = keys[i % len(keys)]; i += 1
        t = time.time()
        try:
            c.request("GET", "/" + k); r = c.getresponse(); r.read(); st = r.status
        except Exception as e:
            st = "exc"; c = http.client.HTTPConnection(host, int(port), timeout=120)
        ms = (time.time() - t) * 1000
        with lock:
            s = stats[sec()]; s["get"][st] += 1; s["getmax"] = max(s["getmax"], ms)
        time.sleep(0.05)
def putter():
    c = http.client.HTTPConnection(host, int(port), timeout=300)
    n = 0
    while time.time() < end:
        n += 1; k = "probe-%d-%d" % (int(end), n)
        t = time.time()
        try:
            c.request("PUT", "/" + k, body=b"x" * 100); r = c.getresponse(); r.read(); st = r.status
            c.request("DELETE", "/" + k); r = c.getresponse(); r.read(); st2 = r.status
            st = "%s/%s" % (st, st2)
        except Exception as e:
            st = "exc:" + type(e).__name__; c = http.client.HTTPConnection(host, int(port), timeout=300)
        ms = (time.time() - t) * 1000
        with lock:
            s = stats[sec()]; s["put"][st] += 1; s["putmax"] = max(s["putmax"], ms)
        time.sleep(0.5)
ts = [threading.Thread(target=getter, args=(i,)) for i in range(4)] + [threading.Thread(target=putter)]
for t in ts: t.start()
last = sec()
while time.time() < end + 1:
    time.sleep(1)
    now = sec()
    with lock:
        for k in sorted(x for x in stats if x < now and x >= last):
            s = stats[k]
            print("%s get %s max %.0fms | put %s max %.0fms" % (time.strftime("%H:%M:%S", time.gmtime(k)),
                  dict(s["get"]), s["getmax"], dict(s["put"]), s["putmax"]), flush=True)
        last = now
for t in ts: t.join()
bad = sum(n for s in stats.values() for k, n in s["get"].items() if k != 302) + \
      sum(n for s in stats.values() for k, n in s["put"].items() if k != "201/204")
slow = max([s["getmax"] for s in stats.values()] or [0])
print("SUMMARY: %d failed requests, slowest GET %.0f ms" % (bad, slow))
sys.exit(1 if bad else 0)
