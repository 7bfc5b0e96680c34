#!/usr/bin/python3
"""Real clients over HTTPS against a master with -tls whose volumes have
-tls too (tests/check_tls.c starts them, of either kind).
Usage: tls_clients.py https://127.0.0.1:PORT CA WORKDIR MKV_BIN ROOT [VOLUMES]
  curl --cacert (PUT, -L through the 302, --aws-sigv4), the 302s and
  ?list&locations naming https:// volumes, mkvread (cafile=), mkv put and
  get (-cacert), with VOLUMES verify, gc and rebalance, boto3, aws, rclone, s3cmd (tests/s3_clients.py with
  S3_CA); without the CA, or with another CA, each fails verification.
       tls_clients.py reload https://127.0.0.1:PORT CA CERTDIR PID LOG
  SIGHUP under load: the server (PID, logging to LOG) serves
  CERTDIR/live.pem and live.key; they are replaced by renewed.* and srv.*
  in turn, each followed by SIGHUP, while four threads make requests (a
  new handshake each, and kept-alive ones); then a bad file, which the
  server must refuse, keeping the last good certificate.  No request may
  fail.
       tls_clients.py waiting https://127.0.0.1:PORT CA PID:PORT...
  Handshakes that wait for the client: 200 connections to each server PORT
  send a whole ClientHello (the server answers and waits for the client's
  Finished), then nothing.  Over the next 3 s each server (PID) may use at
  most 0.15 s of CPU (a loop that runs waiting handshakes again and again
  uses a core), and a request through the master still gets its 302.
       tls_clients.py burst https://127.0.0.1:PORT CA
  A burst of ClientHellos does not hold a loop's requests: 600 sockets each
  send one (each costs the master a signature), then a request on a
  connection already open is sent; when its answer comes, fewer than a
  quarter of the burst's handshakes may have been answered before it (a
  loop that began all it had ready would answer most of them first).
       tls_clients.py stop PID:PORT...
  A stop while handshakes wait (parked) or wait their turn (queued): each
  server PORT gets 1000 connections that send a whole ClientHello and 200
  that send nothing (fewer under a low descriptor limit), then SIGTERM
  (PID); each must be gone within 30 s (the caller then checks that it
  exited 0: libmicrohttpd aborts the process when a daemon stops with a
  connection suspended).
Exits non-zero on the first failure, naming it."""
import json, os, subprocess, sys


def client_hello(host="127.0.0.1"):
    """A whole TLS ClientHello's bytes, as a client's first flight."""
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    try:
        ctx.wrap_bio(bio_in, bio_out, server_hostname=host).do_handshake()
    except ssl.SSLWantReadError:
        pass
    return bio_out.read()


if sys.argv[1] == "reload":
    import http.client, shutil, signal, ssl, threading, time
    END, CA, CERTS, PID, LOG = sys.argv[2:7]
    host, port = END.split("://")[1].split(":")
    ctx = ssl.create_default_context(cafile=CA)
    stop, done, failed = threading.Event(), [0], []

    def load(fresh):
        c = None
        while not stop.is_set():
            try:
                if c is None or fresh:
                    c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)
                c.request("GET", "/reload/key")
                r = c.getresponse()
                r.read()
                if r.status != 302:
                    failed.append("status %d" % r.status)
                done[0] += 1
            except Exception as e:   # noqa: BLE001 -- any failure counts
                failed.append(repr(e))
                c = None
            if fresh and c:
                c.close()

    def served():
        with ctx.wrap_socket(__import__("socket").create_connection((host, int(port))),
                             server_hostname=host) as t:
            return t.getpeercert(binary_form=True)

    def der(name):
        return ssl.PEM_cert_to_DER_cert(open(os.path.join(CERTS, name + ".pem")).read())

    def install(name):
        for ext in ("pem", "key"):
            shutil.copy(os.path.join(CERTS, "%s.%s" % (name, ext)),
                        os.path.join(CERTS, "live.tmp"))
            os.replace(os.path.join(CERTS, "live.tmp"), os.path.join(CERTS, "live." + ext))
        os.kill(int(PID), signal.SIGHUP)

    def wait_for(what, cond):
        end = time.monotonic() + 30
        while not cond():
            if time.monotonic() > end:
                print("FAIL: %s within 30 s" % what, flush=True)
                sys.exit(1)
            time.sleep(0.05)

    c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)
    c.request("PUT", "/reload/key", body=b"reloaded")
    if c.getresponse().status != 201:
        print("FAIL: PUT /reload/key", flush=True)
        sys.exit(1)
    c.close()
    threads = [threading.Thread(target=load, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for name in ("renewed", "srv", "renewed"):
        before = done[0]
        install(name)
        wait_for("the %s certificate served" % name, lambda: served() == der(name))
        wait_for("requests during the %s reload" % name, lambda: done[0] > before + 20)
    with open(os.path.join(CERTS, "live.pem"), "w") as f:
        f.write("not a certificate\n")
    os.kill(int(PID), signal.SIGHUP)
    wait_for("the bad file refused in the log",
             lambda: "still serving the certificate loaded before" in open(LOG).read())
    before = done[0]
    wait_for("requests after the bad file", lambda: done[0] > before + 20)
    stop.set()
    for t in threads:
        t.join()
    if failed or served() != der("renewed"):
        print("FAIL: %d requests failed (%s); renewed still served: %s" %
              (len(failed), failed[:3], served() == der("renewed")), flush=True)
        sys.exit(1)
    print("reload: %d requests, none failed" % done[0], flush=True)
    sys.exit(0)

if sys.argv[1] == "waiting":
    import http.client, socket, ssl, time
    END, CA = sys.argv[2:4]
    servers = [a.split(":") for a in sys.argv[4:]]
    hello, held = client_hello(), []
    for _, port in servers:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", int(port)))
            s.sendall(hello)
            held.append(s)
    for s in held:   # each answered (the server's work for it done): nothing more should run
        s.settimeout(60)
        s.recv(1)
    time.sleep(0.5)

    def cpu(pid):   # utime + stime, in seconds
        f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    before = [cpu(pid) for pid, _ in servers]
    time.sleep(3)
    used = [cpu(pid) - b for (pid, _), b in zip(servers, before)]
    host, port = END.split("://")[1].split(":")
    c = http.client.HTTPSConnection(host, int(port), timeout=30,
                                    context=ssl.create_default_context(cafile=CA))
    c.request("GET", "/waiting/key")
    status = c.getresponse().status
    if max(used) > 0.15 or status != 404:
        print("FAIL: CPU used in 3 s beside %d waiting handshakes: %s; GET answered %d" %
              (len(held), ", ".join("%.2f s" % u for u in used), status), flush=True)
        sys.exit(1)
    print("waiting: %s s of CPU in 3 s" % used, flush=True)
    sys.exit(0)

if sys.argv[1] == "stop":
    import resource, signal, socket, ssl, time
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    hello, held = client_hello(), []
    servers = [a.split(":") for a in sys.argv[2:]]
    n = min(1200, (hard - 100) // len(servers))   # within the descriptors there are
    for _, port in servers:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", int(port)))
            if i < n * 5 // 6:
                s.sendall(hello)
            held.append(s)
    for pid, _ in servers:
        os.kill(int(pid), signal.SIGTERM)

    def running(pid):   # neither gone nor a zombie
        try:
            return open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    end = time.time() + 30
    while any(running(pid) for pid, _ in servers) and time.time() < end:
        time.sleep(0.1)
    left = [pid for pid, _ in servers if running(pid)]
    if left:
        print("FAIL: still running 30 s after SIGTERM: %s" % left, flush=True)
        sys.exit(1)
    print("stop: %d connections held, each server gone" % len(held), flush=True)
    sys.exit(0)

if sys.argv[1] == "burst":
    import http.client, select, socket, ssl
    END, CA = sys.argv[2:4]
    host, port = END.split("://")[1].split(":")
    hello = client_hello(host)
    c = http.client.HTTPSConnection(host, int(port), timeout=120,
                                    context=ssl.create_default_context(cafile=CA))
    c.request("GET", "/burst/key")
    c.getresponse().read()
    burst = [socket.create_connection((host, int(port))) for _ in range(600)]
    for s in burst:
        s.sendall(hello)
    c.request("GET", "/burst/key")
    status = c.getresponse().status
    answered = len(select.select(burst, [], [], 0)[0])
    if status != 404 or answered >= len(burst) // 4:
        print("FAIL: GET answered %d after %d of %d handshakes begun before it were answered"
              % (status, answered, len(burst)), flush=True)
        sys.exit(1)
    print("burst: %d of %d handshakes answered before the request" % (answered, len(burst)))
    sys.exit(0)

END, CA, WORK, BIN, ROOT = sys.argv[1:6]
os.makedirs(WORK, exist_ok=True)
WRONG = os.path.join(os.path.dirname(CA), "wrongca.pem")
ENV = dict(os.environ, AWS_ACCESS_KEY_ID="mkv", AWS_SECRET_ACCESS_KEY="mkv")
ENV.pop("AWS_CA_BUNDLE", None)     # rclone 1.60 stops at it (NOTES.md)
ENV.pop("CURL_CA_BUNDLE", None)
ENV.pop("SSL_CERT_FILE", None)
P = "/tls%d" % os.getpid()


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def run(args, ok=True, **kw):
    p = subprocess.run(args, env=ENV, capture_output=True, timeout=600, **kw)
    if ok:
        check(p.returncode == 0, "%s -> %d\n%s%s" % (" ".join(args), p.returncode,
                                                    p.stdout.decode(errors="replace"),
                                                    p.stderr.decode(errors="replace")))
    return p


def curl(*args, ca=CA):
    return run(["curl", "-sS", "--max-time", "60"] + (["--cacert", ca] if ca else []) +
               list(args), ok=False)


# ---- curl ----
body = os.urandom(200000)
src = os.path.join(WORK, "body")
with open(src, "wb") as f:
    f.write(body)
p = curl("-o", "/dev/null", "-w", "%{http_code}", "-T", src, END + P + "/big")
check(p.stdout == b"201", "curl --cacert -T: %r %r" % (p.stdout, p.stderr))
p = curl("-w", "\n%{http_code} %{num_redirects} %{url_effective}", "-L", END + P + "/big")
out, _, tail = p.stdout.rpartition(b"\n")
code, redirs, url = tail.decode().split()
check(out == body and code == "200" and redirs == "1" and url.startswith("https://"),
      "curl -L through the 302: %s %s %s" % (code, redirs, url))
p = curl("-r", "70000-150099", "-L", END + P + "/big")   # a Range, read from the file's middle
check(p.stdout == body[70000:150100], "curl -r through the 302: %d bytes" % len(p.stdout))
p = curl("-I", END + P + "/big")
loc = [l for l in p.stdout.decode().splitlines() if l.lower().startswith("location:")]
check(loc and loc[0].split(None, 1)[1].startswith("https://"), "the 302 names https: %r" % loc)
sig = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "mkv:mkv"]
p = curl(*sig, "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "--data-binary", "signed",
         END + P + "/signed")
check(p.stdout == b"201", "curl --aws-sigv4 PUT: %r %r" % (p.stdout, p.stderr))
p = curl(*sig, "-L", END + P + "/signed")
check(p.stdout == b"signed", "curl --aws-sigv4 -L GET: %r" % p.stdout)
p = curl(END + P + "/?list&locations")
locs = json.loads(p.stdout)["locations"]
check(locs and all(u.startswith("https://") for l in locs for u in l),
      "?list&locations names https:// volumes: %r" % locs)
for u in locs[0]:   # each volume verified by the same CA
    p = curl("-o", "/dev/null", "-w", "%{http_code}", u)
    check(p.stdout == b"200", "GET %s with --cacert: %r" % (u, p.stdout))
for ca, what in ((None, "no CA (the system's)"), (WRONG, "another CA")):
    p = curl("-o", "/dev/null", END + P + "/big", ca=ca)
    check(p.returncode == 60, "curl with %s: exit %d, not 60 (verification)" % (what, p.returncode))
    p = curl("-o", "/dev/null", locs[0][0], ca=ca)
    check(p.returncode == 60, "curl to a volume with %s: exit %d, not 60" % (what, p.returncode))
p = curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", "--data-binary", "gone",
         END + P + "/gone")
check(p.stdout == b"201", "PUT of a key to delete: %r" % p.stdout)
p = curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", END + P + "/gone")
check(p.stdout == b"204", "DELETE (its replicas over TLS): %r %r" % (p.stdout, p.stderr))
p = curl("-o", "/dev/null", "-w", "%{http_code}", "-L", END + P + "/gone")
check(p.stdout == b"404", "GET after DELETE: %r" % p.stdout)
print("curl: ok", flush=True)

# ---- mkvread ----
sys.path.insert(0, os.path.join(ROOT, "tools"))
import mkvread   # noqa: E402
with mkvread.Reader(END, P + "/", threads=4, cafile=CA, md5=True) as r:
    got = {k: v for k, v in r}
check(got == {P + "/big": body, P + "/signed": b"signed"}, "mkvread cafile=: %r" % list(got))
try:
    with mkvread.Reader(END, P + "/", cafile=WRONG) as r:
        r.keys()
    check(False, "mkvread with another CA listed the keys")
except OSError as e:
    check("CERTIFICATE_VERIFY_FAILED" in str(e), "mkvread with another CA: %s" % e)
p = run([sys.executable, os.path.join(ROOT, "tools/mkvread.py"), "-cafile", WRONG, END, P,
         os.path.join(WORK, "mkvread")], ok=False)
check(p.returncode == 1 and b"CERTIFICATE_VERIFY_FAILED" in p.stderr and b"Traceback" not in p.stderr,
      "mkvread.py -cafile of another CA: exit %d, %s" % (p.returncode, p.stderr))
print("mkvread: ok", flush=True)

# ---- mkv put/get ----
tree = os.path.join(WORK, "tree")
for i in range(20):
    os.makedirs(os.path.join(tree, "d%d" % (i % 3)), exist_ok=True)
    with open(os.path.join(tree, "d%d" % (i % 3), "f%d" % i), "wb") as f:
        f.write(os.urandom(1 + i * 5000))
mkv = os.path.join(BIN, "mkv")
run([mkv, "-master", END, "-cacert", CA, "put", tree, P + "/tree"])
back = os.path.join(WORK, "back")
run([mkv, "-master", END, "-cacert", CA, "get", P + "/tree", back])
run(["diff", "-r", tree, back])
p = run([mkv, "-master", END, "-cacert", WRONG, "get", P + "/tree", back + "2"], ok=False)
err = p.stderr.decode(errors="replace")
check(p.returncode != 0 and "certificate" in err.lower(), "mkv get with another CA: %d %s" %
      (p.returncode, err[-500:]))
if len(sys.argv) > 6:   # the volumes (https://...): verify, gc, rebalance through the master
    ops = [mkv, "-volumes", sys.argv[6], "-master", END, "-cacert", CA]
    out = run(ops + ["verify"]).stderr.decode()
    check(" 0 missing, 0 corrupt" in out and " 0 failed" in out, "mkv verify: " + out)
    out = run(ops + ["gc"]).stderr.decode()
    check(" 0 orphans" in out and " 0 failed" in out, "mkv gc: " + out)
    out = run(ops + ["rebalance"]).stderr.decode()
    check(" 0 failed" in out, "mkv rebalance: " + out)
print("mkv put/get: ok", flush=True)

# ---- S3 clients, each with its own CA option ----
s3 = subprocess.run([sys.executable, os.path.join(ROOT, "tests/s3_clients.py"), END,
                     os.path.join(WORK, "s3")], env=dict(ENV, S3_CA=CA), timeout=1200)
check(s3.returncode == 0, "s3_clients.py with S3_CA")
print("tls_clients: all ok", flush=True)
