#!/usr/bin/python3
"""`mkv get -volumesecret` against a listing it must not trust (issue 41,
finding 7): the listing comes over plain HTTP, so whoever can change it
must not get a signed GET for a host of theirs, or for another key's blob.
A fake master answers ?list&locations with URLs on a fake volume that
records what it is asked.
Usage: get_listing.py MKV SECRETFILE WORKDIR.  Exits non-zero on the first
failure, naming it.  Run by check_volsign.c."""
import base64, hashlib, http.server, json, os, subprocess, sys, threading

MKV, SECRET, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
seen = []          # what the fake volume was asked: "path?query"
listing = {}       # what the fake master lists


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def key2path(key):
    d = hashlib.md5(key).digest()
    return "/%02x/%02x/%s" % (d[0], d[1], base64.b64encode(key).decode())


class Volume(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        seen.append(self.path)
        body = b"the value"
        self.send_response(200 if listing.get("serve") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Master(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if "list" in self.path:
            body = json.dumps({"next": "", "keys": ["/p/a"], "locations": [listing["urls"]],
                               "md5s": [""]}).encode()
            self.send_response(200)
        else:   # the redirect, the last resort: none here
            body = b"key not found\n"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def serve(handler):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return "127.0.0.1:%d" % s.server_address[1]


vol, master = serve(Volume), serve(Master)


def get(urls, volumes, serve=False):
    listing.update(urls=urls, serve=serve)
    seen.clear()
    out = os.path.join(WORK, "got")
    args = [MKV, "-master", master, "-volumesecret", SECRET]
    if volumes:
        args += ["-volumes", volumes]
    p = subprocess.run(args + ["get", "/p", out], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


mine = "http://%s/sv00%s" % (vol, key2path(b"/p/a"))
other = "http://%s/sv00%s" % (vol, key2path(b"/secret/x"))

# a host the listing made up: never signed for (no -volumes: none is ours)
rc, out = get([mine], None)
check(not any("md5=" in s for s in seen), "signed for a host not in -volumes: %s\n%s" % (seen, out))
check("every key is read through the master" in out, "says why:\n" + out)
# one of -volumes, but another key's blob: the key is refused, nothing is asked
rc, out = get([mine, other], vol)
check(not any(key2path(b"/secret/x") in s for s in seen),
      "signed for another key's blob: %s\n%s" % (seen, out))
check(rc != 0 and "is not this key's blob" in out, "says why:\n" + out)
# the right blob on a volume of -volumes: read, signed
rc, out = get([mine], vol, serve=True)
check(rc == 0 and len(seen) == 1 and "md5=" in seen[0] and "expires=" in seen[0],
      "the blob read signed: %s\n%s" % (seen, out))
with open(os.path.join(WORK, "got", "a"), "rb") as f:
    check(f.read() == b"the value", "the file")
print("ok")
