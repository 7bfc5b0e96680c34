#!/usr/bin/python3
"""Row 15 of bench/run.sh: a training job's read of every key under a
prefix, files/s, four ways, standard library only:
  module    tools/mkvread.py's Reader (its listing timed too)
  direct    the same volume URLs (from the same listing, untimed), fetched
            straight with http.client: THREADS threads, kept-alive
            connections of their own, each value handed to the caller's
            thread (as the module does)
  pool      the same, through the module's own connections (mkvread._Pool,
            one per volume): the module's limit, its replicas, fallbacks
            and window left out
  redirect  what a requests-like reader does: GET the master's key, follow
            its 302 to the volume; kept-alive connections to both
Usage: read15.py module|direct|pool|redirect MASTER_URL /prefix/ THREADS"""
import http.client, os, sys, threading, time, urllib.parse
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import mkvread  # noqa: E402

MODE, MASTER, PREFIX, THREADS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


local = threading.local()


def get(url):
    """GET url on this thread's kept-alive connection to its host."""
    u = urllib.parse.urlsplit(url)
    conns = local.__dict__.setdefault("conns", {})
    c = conns.get(u.netloc)
    if c is None:
        c = conns[u.netloc] = http.client.HTTPConnection(u.netloc, timeout=60)
    c.request("GET", u.path + ("?" + u.query if u.query else ""))
    r = c.getresponse()
    return r.status, r.getheader("Location"), r.read()


def threads(jobs, fetch):
    """Every job's bytes handed to this thread, as a reader gives them to
    its caller (and as the module does): THREADS at a time, in order."""
    t0 = time.time()
    with ThreadPoolExecutor(THREADS) as ex:
        for body in ex.map(lambda j: fetch(get, j), jobs):
            pass
    return time.time() - t0


def direct_fetch(get, url):
    st, _, body = get(url)
    assert st == 200, (url, st)
    return body


def pool_fetch(_, job):
    st, body = r._pool(job[0]).get(job[1])
    assert st == 200, (job, st)
    return body


def redirect_fetch(get, url):
    st, loc, _ = get(url)
    assert st == 302, (url, st)
    st, _, body = get(loc)
    assert st == 200, (loc, st)
    return body


if MODE == "module":
    t0 = time.time()
    n = sum(1 for _ in mkvread.Reader(MASTER, PREFIX, threads=THREADS))
    dt = time.time() - t0
else:
    r = mkvread.Reader(MASTER, PREFIX)
    keys = r.keys()
    n = len(keys)
    urls = [r._locs[k][i % len(r._locs[k])] for i, k in enumerate(keys)]
    if MODE == "direct":
        dt = threads(urls, direct_fetch)
    elif MODE == "pool":
        jobs = [mkvread._split(u) for u in urls]
        dt = threads(jobs, pool_fetch)
    else:
        dt = threads([MASTER + urllib.parse.quote(k.encode()) for k in keys], redirect_fetch)
print("%.0f" % (n / dt))
