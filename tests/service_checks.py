#!/usr/bin/python3
"""service_checks.py -- check_service's checks that need Python's tools:
Debian's prometheus_client parser, a real Prometheus server, and headless
chromium (selenium + chromium-driver).  Each mode exits 0 when every check
held, else 1 naming the first that did not.  A missing package is a
failure, never a skip.

  metrics MASTER_BASE MASTER_METRICS VOL_BASE VOL_METRICS
  prometheus TMPDIR MASTER_BASE TARGET...           (TARGET: host:port of a -metrics)
  browser TMPDIR MASTER_METRICS VOL_METRICS VOL_PID VOL_NAME
                                  (MKV_SCREENSHOT=FILE keeps the screenshot)
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def fail(msg):
    print("service_checks: FAILED: " + msg, flush=True)
    sys.exit(1)


def http(method, url, body=None):
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:   # 3xx (not followed) and errors
        return e.code, e.read(), e.headers


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


urllib.request.install_opener(urllib.request.build_opener(NoRedirect))


def scrape(base):
    """{(name, frozenset(labels)): value} and {family name: type}, parsed
    by the reference parser from base/metrics."""
    st, body, hdr = http("GET", base + "/metrics")
    if st != 200:
        fail("%s/metrics answered %d" % (base, st))
    ctype = hdr.get("Content-Type", "")
    if not ctype.startswith("text/plain; version=0.0.4"):
        fail("%s/metrics Content-Type %r" % (base, ctype))
    samples, types = {}, {}
    for fam in text_string_to_metric_families(body.decode()):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, types


def get(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def expect_delta(before, after, name, want, **labels):
    d = get(after, name, **labels) - get(before, name, **labels)
    if d != want:
        fail("%s%s moved by %g, the test made %g" % (name, labels, d, want))


def mode_metrics(master, mmetrics, vol, vmetrics):
    msamples, mtypes = scrape(mmetrics)
    # the process's own figures are the process's: started before now, not long ago
    for name, lo, hi in [("process_start_time_seconds", time.time() - 3600, time.time()),
                         ("process_virtual_memory_bytes", 1 << 20, 1 << 50),
                         ("process_resident_memory_bytes", 1 << 16, 1 << 40),
                         ("process_cpu_seconds_total", 0, 3600)]:
        if not lo <= get(msamples, name) <= hi:
            fail("master: %s is %g, not in [%g, %g]" % (name, get(msamples, name), lo, hi))
    for fam, typ in [("process_cpu_seconds", "counter"), ("process_resident_memory_bytes", "gauge"),
                     ("process_open_fds", "gauge"), ("process_start_time_seconds", "gauge"),
                     ("mkv_http_requests", "counter"),
                     ("mkv_http_request_duration_seconds", "histogram"),
                     ("mkv_http_request_bytes", "counter"), ("mkv_http_response_bytes", "counter"),
                     ("mkv_http_requests_in_flight", "gauge"), ("mkv_volume_up", "gauge"),
                     ("mkv_volume_check_seconds", "gauge"), ("mkv_volume_errors", "counter"),
                     ("mkv_handoffs", "counter"), ("mkv_keylock_conflicts", "counter"),
                     ("mkv_index_keys", "gauge")]:
        if mtypes.get(fam) != typ:
            fail("master: family %s is %r, want %s" % (fam, mtypes.get(fam), typ))
    _, vtypes = scrape(vmetrics)
    for fam, typ in [("process_cpu_seconds", "counter"), ("mkv_http_requests", "counter"),
                     ("mkv_volume_fsync_duration_seconds", "histogram"),
                     ("mkv_volume_disk_bytes", "gauge"), ("mkv_volume_disk_free_bytes", "gauge"),
                     ("mkv_volume_tmp_files", "gauge")]:
        if vtypes.get(fam) != typ:
            fail("volume: family %s is %r, want %s" % (fam, vtypes.get(fam), typ))

    # The master: exactly the requests made here (health checks are the
    # master's own requests, not its front's).
    key = "/metrics-%d" % os.getpid()
    body = b"x" * 1000
    m0, _ = scrape(mmetrics)
    want = [("PUT", key, body, 201), ("GET", key, None, 302), ("GET", key, None, 302),
            ("HEAD", key, None, 302), ("GET", key + "-absent", None, 404),
            ("PUT", key, body, 403), ("DELETE", key, None, 204), ("DELETE", key, None, 404)]
    for method, k, b, st in want:
        got, _, _ = http(method, master + k, b)
        if got != st:
            fail("%s %s answered %d, want %d" % (method, k, got, st))
    m1, _ = scrape(mmetrics)
    counts = {}
    for method, _, _, st in want:
        counts[(method, st)] = counts.get((method, st), 0) + 1
    for (method, st), n in counts.items():
        expect_delta(m0, m1, "mkv_http_requests_total", n, method=method, code=str(st))
    for method in ("GET", "HEAD", "PUT", "DELETE"):
        n = sum(v for (m, _), v in counts.items() if m == method)
        expect_delta(m0, m1, "mkv_http_request_duration_seconds_count", n, method=method)
        expect_delta(m0, m1, "mkv_http_request_duration_seconds_bucket", n, method=method,
                     le="+Inf")
    # the 403 is answered before its body is read: only the 201's counts
    expect_delta(m0, m1, "mkv_http_request_bytes_total", len(body))
    if get(m1, "mkv_http_requests_in_flight") != 0:
        fail("master: requests in flight %g with none running" % get(m1, "mkv_http_requests_in_flight"))

    # The volume: GETs straight to it (the master's checks are HEADs and PUTs).
    vkey = "/direct-%d" % os.getpid()
    v0, _ = scrape(vmetrics)   # after the master's PUTs and DELETEs to it
    if http("PUT", vol + vkey, b"y" * 300)[0] != 201:
        fail("PUT to the volume")
    v1, _ = scrape(vmetrics)
    for _ in range(5):
        if http("GET", vol + vkey)[0] != 200:
            fail("GET from the volume")
    http("GET", vol + vkey + "-absent")
    v2, _ = scrape(vmetrics)
    expect_delta(v0, v1, "mkv_http_requests_total", 1, method="PUT", code="201")
    expect_delta(v1, v2, "mkv_http_requests_total", 5, method="GET", code="200")
    expect_delta(v1, v2, "mkv_http_requests_total", 1, method="GET", code="404")
    expect_delta(v1, v2, "mkv_http_response_bytes_total", 5 * 300 + len(
        http("GET", vol + vkey + "-absent")[1]))
    if get(v1, "mkv_volume_fsync_duration_seconds_count") <= get(v0, "mkv_volume_fsync_duration_seconds_count"):
        fail("volume: a PUT made no fsync count")
    print("service_checks: metrics of both servers parsed, counters moved exactly", flush=True)


def mode_prometheus(tmp, master, targets):
    port = int(os.environ["PROM_PORT"])
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: mkv\n    static_configs:\n"
                "      - targets: [%s]\n" % ", ".join("'%s'" % t for t in targets))
    log = open(os.path.join(tmp, "prometheus.log"), "w")
    prom = subprocess.Popen(["prometheus", "--config.file=" + cfg,
                             "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                             "--web.listen-address=127.0.0.1:%d" % port],
                            stdout=log, stderr=subprocess.STDOUT)
    api = "http://127.0.0.1:%d/api/v1/" % port

    def q(path):
        try:
            st, body, _ = http("GET", api + path)
        except (urllib.error.URLError, ConnectionError):
            return None
        return json.loads(body) if st == 200 else None

    def total():
        r = q("query?query=sum(mkv_http_requests_total%7Bjob%3D%22mkv%22%7D)")
        res = r and r["data"]["result"]
        return float(res[0]["value"][1]) if res else None

    try:
        end = time.time() + 30
        while True:   # every target up, as Prometheus's API reports them
            r = q("targets")
            act = r["data"]["activeTargets"] if r else []
            up = sorted(t["labels"]["instance"] for t in act if t["health"] == "up")
            if up == sorted(targets):
                break
            if time.time() > end:
                fail("Prometheus targets up %s, want %s: %s" % (up, sorted(targets), act))
            time.sleep(0.2)
        end = time.time() + 30
        while total() is None:
            if time.time() > end:
                fail("Prometheus has no mkv_http_requests_total")
            time.sleep(0.2)
        before = total()
        for i in range(10):
            http("GET", master + "/prom-absent-%d" % i)
        end = time.time() + 30
        while total() < before + 10:
            if time.time() > end:
                fail("Prometheus's sum of mkv_http_requests_total stayed at %g (before %g)"
                     % (total(), before))
            time.sleep(0.2)
        print("service_checks: Prometheus scraped %d targets, all up; requests %g -> %g"
              % (len(targets), before, total()), flush=True)
    finally:
        prom.terminate()
        prom.wait(10)


def mode_browser(tmp, mmetrics, vmetrics, vol_pid, vol_name):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1100,700", "--user-data-dir=" + os.path.join(tmp, "chrome")):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        def rows():
            return drv.execute_script(
                "return [...document.querySelectorAll('#volumes tbody tr')]"
                ".map(t => [t.dataset.volume, t.dataset.state, t.cells[2].textContent])")

        def wait_rows(pred, what, secs):
            end = time.time() + secs
            while True:
                r = rows()
                if pred(r):
                    return r
                if time.time() > end:
                    fail("%s: the page shows %s" % (what, r))
                time.sleep(0.05)

        def charts():
            """[(row's volume or 'own', width, height)] of the page's SVG charts."""
            return drv.execute_script(
                "return [...document.querySelectorAll('svg.chart')].map(s => {"
                "const r = s.getBoundingClientRect(), t = s.closest('tr');"
                "return [t ? t.dataset.volume : 'own', r.width, r.height]})")

        def drawn(what, want):
            c = charts()
            if sorted(x[0] for x in c) != sorted(want) or not all(x[1] > 0 and x[2] > 0 for x in c):
                fail("%s: charts %s, want one of non-zero size for each of %s" % (what, c, want))

        # The volume's own page: its subvolume directories with their disk,
        # there as served (the script's first refresh is 2 s away).
        drv.get(vmetrics + "/")
        r = rows()
        if len(r) != 10 or r[0][0] != "sv00" or "of" not in r[0][2]:
            fail("volume page as served: rows %s" % r)
        drawn("volume page", ["own"])
        # The master's: every volume up, with a disk bar and a chart; one
        # killed turns down (the script swaps in the page anew every 2 s).
        drv.get(mmetrics + "/")
        r = rows()
        if len(r) != 3 or not all(x[1] == "up" for x in r):
            fail("master page as served: rows %s" % r)
        if not all("of" in x[2] for x in r) or not drv.find_elements("css selector", ".bar i"):
            fail("master page: no disk bars: %s" % r)
        drawn("master page", ["own"] + [x[0] for x in r])
        shot = os.environ.get("MKV_SCREENSHOT") or os.path.join(tmp, "status.png")
        drv.save_screenshot(shot)
        with open(shot, "rb") as f:
            png = f.read()
        if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 10000:
            fail("the screenshot is not a PNG of a page (%d bytes)" % len(png))
        title = drv.find_element("id", "title").text
        if not title.startswith("mkv master"):
            fail("master page title %r" % title)
        os.kill(vol_pid, signal.SIGKILL)
        t0 = time.time()
        r = wait_rows(lambda r: [x[1] for x in r if x[0] == vol_name] == ["down"],
                      "the killed volume %s's row down" % vol_name, 20)
        if sorted(x[1] for x in r) != ["down", "up", "up"]:
            fail("after the kill: %s" % r)
        print("service_checks: status pages drawn in chromium (screenshot %s); the killed "
              "volume's row turned down %.2f s after the kill" % (shot, time.time() - t0),
              flush=True)
    finally:
        drv.quit()


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "metrics":
        mode_metrics(*args)
    elif mode == "prometheus":
        mode_prometheus(args[0], args[1], args[2:])
    elif mode == "browser":
        mode_browser(args[0], args[1], args[2], int(args[3]), args[4])
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
