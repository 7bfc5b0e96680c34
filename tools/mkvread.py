#!/usr/bin/python3
"""mkvread -- read a dataset out of mkv at the volumes' speed.

Standard library only.  A Reader lists a prefix's keys with the URLs of
their replicas once (GET /prefix?list&locations, paged), then reads the
values straight from the volumes -- no redirect per file -- on `threads`
threads over kept-alive connections, one pool per volume:

    import mkvread
    r = mkvread.Reader("http://master:3000", "/train/", threads=8)
    for key, value in r:          # every key under the prefix, listing order
        ...
    r.get("/train/00001.jpg")     # one value
    r.keys()                      # the keys (listed once)

A Reader may be made before a fork (PyTorch's DataLoader workers): each
process then opens its own connections.  Reads are spread over a key's
replicas; a replica that fails (refused,
reset, timeout, a short body, 404, 410) is followed by the next.  When
every replica failed the locations are stale: a 410 (the signed links
expired, -linkttl or ttl=) lists the whole prefix again; otherwise the
key alone is listed again (a volume moved or died) and read once more.

Errors: a key that cannot be read raises ReadError (its .key and
.reason); a key no longer live (deleted since the listing) raises
KeyGone, a ReadError.  Iterating with errors="yield" (Reader(...,
errors="yield") or r.items(errors="yield")) yields (key, exception)
for such a key and goes on; the default, "raise", stops there.  A
listing the master refuses raises ListError.  Each value's length is
checked against Content-Length; with md5=True the listing carries each
key's md5 (&md5s) and every value is checked against it.

A master with -keys wants its requests signed: the listing is signed
with AWS Signature Version 4 by the key in AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (as mkv's own commands and the aws CLI read them),
or Reader(..., credentials=(id, secret)); the key needs read and list
on the prefix (docs/security.md).  The volume URLs need no key: the
master signs them itself when it has -volumesecret.

https:// (the master's URL, and volumes the listing names so) is verified
against the system's CAs, or Reader(..., cafile=PATH) (CLI: -cafile).

CLI: mkvread.py [-threads N] [-ttl D] [-cafile F] MASTER_URL /prefix DIR writes
each key PREFIX/rest to DIR/rest (as `mkv get` does: names with "",
"." or ".." segments are refused), through a temporary file renamed
into place.  Exit status 1 when any key failed.
"""
import collections
import hashlib
import hmac
import http.client
import itertools
import json
import os
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

__all__ = ["Reader", "ReadError", "KeyGone", "ListError", "sigv4_headers"]

PAGE = 10000        # keys per listing page
DOWN_S = 5.0        # a volume that failed is tried last for this long
WINDOW = 16         # iterating: keys asked ahead, per thread (values held)


class ReadError(Exception):
    """A key that could not be read: .key, .reason."""

    def __init__(self, key, reason):
        super().__init__("%s: %s" % (key, reason))
        self.key = key
        self.reason = reason


class KeyGone(ReadError):
    """The key is no longer live: deleted (or unlinked) since the listing."""


class ListError(Exception):
    """The master's listing failed (its status and reason in the message)."""


def sigv4_headers(method, netloc, target, key_id, secret, now=None):
    """The headers that sign a request to an mkv master with -keys: AWS
    Signature Version 4 (region us-east-1, service s3), host and
    x-amz-date signed, the body unsigned (no x-amz-content-sha256, so
    the native API answers, as to curl's --aws-sigv4)."""
    def enc(s):
        return urllib.parse.quote(urllib.parse.unquote_to_bytes(s), safe="")
    path, _, query = target.partition("?")
    params = []
    for p in query.split("&") if query else []:
        if p:
            n, _, v = p.partition("=")
            params.append((enc(n), enc(v)))
    amzdate = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    scope = amzdate[:8] + "/us-east-1/s3/aws4_request"
    creq = "\n".join([
        method,
        urllib.parse.quote(urllib.parse.unquote_to_bytes(path), safe="/"),
        "&".join("%s=%s" % nv for nv in sorted(params)),
        "host:" + netloc, "x-amz-date:" + amzdate, "",
        "host;x-amz-date",
        hashlib.sha256(b"").hexdigest()])
    tosign = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                        hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, tosign.encode(), hashlib.sha256).hexdigest()
    return {"Host": netloc, "X-Amz-Date": amzdate,
            "Authorization": "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=host;x-amz-date, "
                             "Signature=%s" % (key_id, scope, sig)}


def _recv_exact(sock, n):
    """n bytes off sock: one recv (MSG_WAITALL: the kernel fills the
    bytes handed back, no buffer between), more only when it came short."""
    body = sock.recv(n, socket.MSG_WAITALL) if n else b""
    if len(body) == n:
        return body
    parts, got = [body], len(body)
    while got < n:
        b = sock.recv(n - got, socket.MSG_WAITALL)
        if not b:
            raise http.client.IncompleteRead(b"".join(parts), n - got)
        parts.append(b)
        got += len(b)
    return b"".join(parts)


class _TLS:
    """An SSL socket with the recv flags the functions above use (an SSL
    socket takes none): MSG_PEEK from a buffer of its own, MSG_WAITALL as
    reads into one bytearray."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def recv(self, n, flags=0):
        if not self.buf:
            self.buf = self.s.recv(max(n, 1 << 16))
        if flags & socket.MSG_PEEK:
            return self.buf[:n]
        out, self.buf = self.buf[:n], self.buf[n:]
        if flags & socket.MSG_WAITALL and 0 < len(out) < n:
            b, got = bytearray(n), len(out)
            b[:got] = out
            while got < n:
                k = self.s.recv_into(memoryview(b)[got:], n - got)
                if not k:
                    break
                got += k
            out = bytes(memoryview(b)[:got])
        return out

    def sendall(self, data):
        self.s.sendall(data)

    def close(self):
        self.s.close()


def _recv_until(sock, sep, limit=65536):
    """The bytes up to the next sep (taken, without it): peeked, then
    taken to sep's end, so nothing after it is read."""
    got = b""
    while True:
        peek = sock.recv(4096, socket.MSG_PEEK)
        if not peek:
            if got:
                raise http.client.IncompleteRead(got)
            raise http.client.RemoteDisconnected("closed before an answer")
        buf = got + peek
        end = buf.find(sep, max(0, len(got) - len(sep) + 1))
        if end >= 0:
            _recv_exact(sock, end + len(sep) - len(got))
            return buf[:end]
        if len(buf) > limit:
            raise http.client.LineTooLong("over %d bytes" % limit)
        got += _recv_exact(sock, len(peek))


def _recv_head(sock):
    """(status, version, {lower-case name: value}) of an answer's head,
    taken to its blank line (1xx heads skipped)."""
    while True:
        lines = _recv_until(sock, b"\r\n\r\n").split(b"\r\n")
        parts = lines[0].split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise http.client.BadStatusLine(lines[0].decode("latin-1"))
        status, headers = int(parts[1]), {}
        for line in lines[1:]:
            name, _, v = line.partition(b":")
            headers[name.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        if not 100 <= status < 200:
            return status, parts[0], headers


def _recv_chunked(sock):
    parts = []
    while True:
        size = _recv_until(sock, b"\r\n").split(b";")[0].strip()
        try:
            n = int(size, 16)
        except ValueError:
            raise http.client.HTTPException("bad chunk size %r" % size) from None
        if n == 0:
            while _recv_until(sock, b"\r\n"):     # trailers
                pass
            return b"".join(parts)
        parts.append(_recv_exact(sock, n))
        if _recv_until(sock, b"\r\n"):
            raise http.client.HTTPException("no CRLF after a chunk")


def _recv_to_close(sock):
    parts = []
    while True:
        b = sock.recv(1 << 20)
        if not b:
            return b"".join(parts)
        parts.append(b)


class _Pool:
    """Kept-alive HTTP/1.1 connections to one host:port, any number of
    threads; each request signed by credentials (id, secret) when given.
    The answer is read straight off the socket (through http.client's
    buffered reader and header parser a thread spent 3.2x the CPU per
    file at 64 KiB, 1.5x at 1 MiB): its head peeked and taken to its
    blank line, a body of known length in one recv into the bytes handed
    back, the timeout the socket's own (SO_RCVTIMEO), so the thread
    waits in the kernel with the GIL let go."""

    def __init__(self, netloc, timeout, credentials=None, cafile=None):
        # "https://host:port" (_split's): TLS, verified by cafile or the system's CAs
        self.ctx = ssl.create_default_context(cafile=cafile) if netloc[:8] == "https://" else None
        self.netloc = netloc[8:] if self.ctx else netloc
        self.timeout, self.credentials = timeout, credentials
        self.idle = []
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def _connect(self):
        host, _, port = self.netloc.rpartition(":")
        if not host or not port.isdigit():
            host, port = self.netloc, "443" if self.ctx else "80"
        sock = socket.create_connection((host.strip("[]"), int(port)), self.timeout)
        if self.ctx:
            sock = self.ctx.wrap_socket(sock, server_hostname=host.strip("[]"))
        if self.timeout is None:
            return _TLS(sock) if self.ctx else sock
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tv = struct.pack("ll", int(self.timeout), int(self.timeout % 1 * 1e6))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
            sock.settimeout(None)   # blocking: MSG_WAITALL waits for the whole body
        except (OSError, AttributeError, struct.error):
            sock.settimeout(self.timeout)   # no SO_RCVTIMEO here: Python's own timeout
        return _TLS(sock) if self.ctx else sock

    def _exchange(self, sock, target):
        """One GET on sock: (status, body, keep the connection?)."""
        head = ["GET %s HTTP/1.1" % target, "Host: " + self.netloc]
        if self.credentials:
            for n, v in sigv4_headers("GET", self.netloc, target, *self.credentials).items():
                if n != "Host":
                    head.append("%s: %s" % (n, v))
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        status, version, h = _recv_head(sock)
        conn = h.get("connection", "").lower()
        keep = "close" not in conn and (version != b"HTTP/1.0" or "keep-alive" in conn)
        if status in (204, 304):
            body = b""
        elif "chunked" in h.get("transfer-encoding", "").lower():
            body = _recv_chunked(sock)
        elif "content-length" in h:
            try:
                n = int(h["content-length"])
            except ValueError:
                n = -1
            if n < 0:
                raise http.client.HTTPException("Content-Length %r" % h["content-length"])
            body = _recv_exact(sock, n)
        else:
            body, keep = _recv_to_close(sock), False
        return status, body, keep

    def get(self, target):
        """GET target: (status, body).  Raises OSError or
        http.client.HTTPException when no whole answer came."""
        if self.pid != os.getpid():
            # a forked child (PyTorch's DataLoader workers): the parent's
            # connections are the parent's, never to be shared
            self.idle, self.lock, self.pid = [], threading.Lock(), os.getpid()
        for reused in (True, False):
            sock = None
            if reused:
                with self.lock:
                    sock = self.idle.pop() if self.idle else None
                if sock is None:
                    continue
            else:
                sock = self._connect()
            try:
                status, body, keep = self._exchange(sock, target)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                sock.close()
                if reused:      # closed while idle by the server: once more, fresh
                    continue
                raise
            except BlockingIOError:     # SO_RCVTIMEO ran out
                sock.close()
                raise socket.timeout("timed out") from None
            except BaseException:
                sock.close()
                raise
            if keep:
                with self.lock:
                    self.idle.append(sock)
            else:
                sock.close()
            return status, body
        raise AssertionError("unreachable")

    def close(self):
        with self.lock:
            for c in self.idle:
                c.close()
            self.idle = []


def _split(url):
    """ "http://host:port/path?query" -> ("host:port", "/path?query");
    https keeps its scheme: ("https://host:port", ...) """
    scheme, _, rest = url.partition("://")
    i = rest.find("/")
    loc, target = (rest, "/") if i < 0 else (rest[:i], rest[i:])
    return ("https://" + loc if scheme == "https" else loc), target


class Reader:
    """The keys under prefix on the master at master_url, and their values."""

    def __init__(self, master_url, prefix, threads=8, ttl=None, md5=False, timeout=60,
                 errors="raise", credentials=None, cafile=None):
        if errors not in ("raise", "yield"):
            raise ValueError('errors is "raise" or "yield"')
        if credentials is None and os.environ.get("AWS_ACCESS_KEY_ID") and \
                os.environ.get("AWS_SECRET_ACCESS_KEY"):
            credentials = (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
        netloc, path = _split(master_url)
        self.prefix, self.threads, self.ttl, self.md5 = prefix, threads, ttl, md5
        self.timeout, self.errors, self.cafile = timeout, errors, cafile
        self._base = path.rstrip("/")
        self._master = _Pool(netloc, timeout, credentials, cafile)
        self._pools = {}
        self._pools_lock = threading.Lock()
        self._relist_lock = threading.Lock()
        self._keys = None        # listing order
        self._locs = {}          # key -> [url, ...]
        self._md5s = {}          # key -> hex ("" when unknown)
        self._gen = 0            # bumped by every whole listing
        self._down = {}          # netloc -> when it last failed
        self._turn = itertools.count()
        self.listings = 0        # whole listings made (stale links relist)

    # ---- the listing ----

    def _query(self):
        q = "list&locations"
        if self.md5:
            q += "&md5s"
        if self.ttl:
            q += "&ttl=" + urllib.parse.quote(str(self.ttl))
        return q

    def _page(self, prefix, start, limit):
        target = "%s%s?%s&limit=%d" % (self._base, urllib.parse.quote(prefix.encode(), safe="/"),
                                      self._query(), limit)
        if start:
            target += "&start=" + urllib.parse.quote(start.encode(), safe="")
        status, body = self._master.get(target)
        if status != 200:
            hint = "" if self._master.credentials or status not in (401, 403) else \
                " (no key given: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
            raise ListError("GET %s: %d %s%s" % (target, status,
                                                 body.decode("utf-8", "replace").strip(), hint))
        doc = json.loads(body)
        keys, locs = doc["keys"], doc.get("locations")
        if not isinstance(locs, list) or len(locs) != len(keys):
            raise ListError("GET %s: no locations parallel to keys (an mkv master "
                            "older than ?list&locations?)" % target)
        return keys, locs, doc.get("md5s") or [""] * len(keys), doc["next"]

    def _list_all(self):
        keys, locs, md5s, start = [], {}, {}, ""
        while True:
            k, l, m, start = self._page(self.prefix, start, PAGE)
            keys.extend(k)
            locs.update(zip(k, l))
            md5s.update(zip(k, m))
            if not start:
                break
        self._locs, self._md5s, self._keys = locs, md5s, keys
        self._gen += 1
        self.listings += 1

    def _relist(self, gen):
        """List the prefix again, unless another thread did since gen."""
        with self._relist_lock:
            if self._gen == gen:
                self._list_all()

    def _lookup(self, key):
        """key's replica URLs as the master sees them now (a listing of
        the key alone), or None when it is not live."""
        k, l, m, _ = self._page(key, "", 1)
        if not k or k[0] != key:
            return None
        self._locs[key] = l[0]
        self._md5s[key] = m[0]
        return l[0]

    def keys(self):
        """The keys under the prefix, in byte order (listed on first use)."""
        if self._keys is None:
            self._relist(self._gen)
        return list(self._keys)

    def __len__(self):
        return len(self.keys())

    # ---- reading ----

    def _pool(self, netloc):
        p = self._pools.get(netloc)
        if p is None:
            with self._pools_lock:
                p = self._pools.setdefault(netloc, _Pool(netloc, self.timeout, cafile=self.cafile))
        return p

    def _order(self, urls):
        """(netloc, target) of urls from a turning start (replicas share
        the reads), volumes that failed lately last."""
        if not urls:
            return []
        i = next(self._turn) % len(urls)
        urls = [_split(u) for u in urls[i:] + urls[:i]]
        if self._down:
            now = time.monotonic()
            urls.sort(key=lambda u: now - self._down.get(u[0], -1e9) < DOWN_S)
        return urls

    def _try(self, key, urls, reasons):
        """The value from the first replica that gives it whole, else None
        (reasons appended); "stale" when a link had expired (410)."""
        want = self._md5s.get(key) if self.md5 else ""
        for netloc, target in self._order(urls):
            try:
                status, body = self._pool(netloc).get(target)
            except (OSError, http.client.HTTPException) as e:
                self._down[netloc] = time.monotonic()
                reasons.append("%s: %s" % (netloc, e or type(e).__name__))
                continue
            if status == 200 and want and hashlib.md5(body).hexdigest() != want:
                reasons.append("%s: md5 %s, the listing says %s" %
                               (netloc, hashlib.md5(body).hexdigest(), want))
                continue
            if status == 200:
                return body
            reasons.append("%s: %d" % (netloc, status))
            if status == 410:   # a listing's links expire together
                return "stale"
        return None

    def _read(self, key):
        reasons = []
        for _ in range(3):
            gen = self._gen
            urls = self._locs.get(key)
            if urls is None:
                urls = self._lookup(key)
                if urls is None:
                    raise KeyGone(key, "not a live key (deleted since the listing?)")
            got = self._try(key, urls, reasons)
            if isinstance(got, bytes):
                return got
            if got == "stale":
                self._relist(gen)
                if key not in self._locs:
                    raise KeyGone(key, "deleted since the listing")
            elif self._lookup(key) is None:
                raise KeyGone(key, "deleted since the listing")
        raise ReadError(key, "no replica answered: " + "; ".join(reasons))

    def get(self, key):
        """key's value (bytes).  Raises KeyGone or ReadError."""
        if self._keys is None:
            self.keys()
        return self._read(key)

    def items(self, errors=None):
        """(key, value) for every key, in listing order, read `threads` at a
        time; errors as the class says."""
        errors = errors or self.errors
        keys = iter(self.keys())
        ex = ThreadPoolExecutor(self.threads)
        window = collections.deque()
        try:
            for k in itertools.islice(keys, self.threads * WINDOW):
                window.append((k, ex.submit(self._read, k)))
            while window:
                k, f = window.popleft()
                for nk in itertools.islice(keys, 1):
                    window.append((nk, ex.submit(self._read, nk)))
                try:
                    v = f.result()
                except ReadError as e:
                    if errors == "raise":
                        raise
                    v = e
                yield k, v
        finally:
            ex.shutdown(wait=True, cancel_futures=True)

    def __iter__(self):
        return self.items()

    def close(self):
        for p in list(self._pools.values()) + [self._master]:
            p.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def safe_rel(rel):
    """Does rel stay inside a directory (no "", "." or ".." segment)?"""
    return bool(rel) and all(s not in ("", ".", "..") for s in rel.split("/"))


def main(argv):
    args, threads, ttl, cafile = list(argv), 8, None, None
    while args and args[0] in ("-threads", "-ttl", "-cafile") and len(args) > 1:
        if args[0] == "-threads":
            threads = int(args[1])
        elif args[0] == "-ttl":
            ttl = args[1]
        else:
            cafile = args[1]
        args = args[2:]
    if len(args) != 3 or not args[1].startswith("/"):
        sys.stderr.write("usage: mkvread.py [-threads N] [-ttl D] [-cafile F] MASTER_URL /prefix DIR\n")
        return 2
    master, prefix, top = args[0], args[1].rstrip("/"), args[2]
    if cafile and not os.path.isfile(cafile):
        sys.stderr.write("mkvread: -cafile %s: no such file\n" % cafile)
        return 2
    try:
        files, failed = _fetch_all(master, prefix, top, threads, ttl, cafile)
    except OSError as e:   # the master: unreachable, or refused (a certificate, a CA file)
        sys.stderr.write("mkvread: %s\n" % e if e.filename else "mkvread: %s: %s\n" % (master, e))
        return 1
    sys.stderr.write("mkvread: %d files, %d failed\n" % (files, failed))
    return 1 if failed else 0


def _fetch_all(master, prefix, top, threads, ttl, cafile):
    failed = files = 0
    with Reader(master, prefix + "/", threads=threads, ttl=ttl, errors="yield",
                cafile=cafile) as r:
        for key, value in r:
            rel = key[len(prefix) + 1:]
            if isinstance(value, Exception):
                sys.stderr.write("mkvread: %s\n" % value)
                failed += 1
                continue
            if not safe_rel(rel):
                sys.stderr.write("mkvread: %s: not a safe file name below the directory, "
                                 "skipped\n" % key)
                failed += 1
                continue
            path = os.path.join(top, rel)
            tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".mkvread")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(value)
            os.replace(tmp, path)
            files += 1
    return files, failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
