#!/usr/bin/python3
"""Signed requests of random shape, and their edits, for the signature
check's property test (tests/check_sigprop.c; issue 41).

botocore signs each request as a real client would: SigV4 with the
Authorization header in every payload mode (a hex SHA-256, UNSIGNED-PAYLOAD,
STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD
with its chunks signed in the chain, curl's missing header), presigned
SigV4 links, and SigV2's header and query (s3cmd's forms).  Methods,
paths with bytes of every class, queries with repeated and empty
parameters, extra headers signed and unsigned.  Each request must verify.
Then one edit each: a byte of the path, a query parameter added, removed
or changed, a signed header, the body, a chunk, the date, the scope, the
method -- each must fail; an x-amz-* header added unsigned must fail; an
unsigned header that is not x-amz-*, or (SigV2) a parameter V2 does not
sign and that changes nothing, must still verify.

Usage: sig_cases.py SEED N OUT.jsonl [CORPUS_DIR CORPUS_N]
One JSON object a line: m, p, q (or null), h ([[name, value], ...]), now,
body (hex, or null), chunks ([[hex data, signature], ...], or null),
ok (true: must verify), what (the edit, for messages).  CORPUS_DIR gets
CORPUS_N of the requests that verify, in fuzz_sig's form (fuzz/targets.h):
method, path, query ("-": none), then "name: value" lines; their time is
fuzz_sig's, 2013-05-24T00:00:00Z."""
import hashlib, hmac, json, os, random, sys
from email.utils import formatdate
from urllib.parse import quote

from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AKID, SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
T0 = 1369353600                     # 20130524T000000Z: fuzz_sig's "now"
HOST = "127.0.0.1:3000"
CREDS = Credentials(AKID, SECRET)
EMPTY = hashlib.sha256(b"").hexdigest()
MKV_PARAMS = ["list", "unlinked", "locations", "md5s", "ttl", "start", "limit"]
S3_PARAMS = ["prefix", "delimiter", "marker", "max-keys", "list-type", "uploads", "uploadId",
             "partNumber", "acl", "versionId", "delete", "location", "encoding-type"]
# what mkv's SigV2 signs (common/sigv2.c): S3's sub-resources and mkv's own
V2_SUBRES = ["acl", "cors", "delete", "lifecycle", "limit", "list", "location", "locations",
             "logging", "md5s", "notification", "partNumber", "policy", "requestPayment",
             "response-cache-control", "response-content-disposition",
             "response-content-encoding", "response-content-language", "response-content-type",
             "response-expires", "restore", "start", "tagging", "torrent", "ttl", "unlinked",
             "uploadId", "uploads", "versionId", "versioning", "versions", "website"]
BYTE_CLASSES = [
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    b"-._~", b"!$&'()*+,;=:@", b" ", b"%", b"/", b"?#[]", b'"<>\\^`{|}',
    bytes(range(1, 32)) + b"\x7f", bytes(range(0x80, 0x100)), b"\x00"]


def rbytes(rnd, n, ascii=False):
    classes = [c for c in BYTE_CLASSES if not ascii or c[0] < 0x80]
    out = bytearray()
    for _ in range(n):
        out.append(rnd.choice(rnd.choice(classes)))
    return bytes(out)


def enc(b, safe):
    return quote(b, safe=safe)


def now_of(rnd):
    return T0 - rnd.randint(0, 600)    # signed up to 10 minutes before "now"


class Clock:
    """botocore's signers read the clock: set it to the case's time."""
    def __init__(self, t):
        self.t = t

    def __enter__(self):
        import botocore.auth as a
        import datetime as dt
        t = self.t

        class Fixed(dt.datetime):
            @classmethod
            def utcnow(cls):
                return dt.datetime.utcfromtimestamp(t)
        self.saved = a.datetime
        a.datetime = type("m", (), {"datetime": Fixed})
        return self

    def __exit__(self, *e):
        import botocore.auth as a
        a.datetime = self.saved


class Payload(S3SigV4Auth):
    """S3's signer with the payload mode chosen (None: the body's hash)."""
    def __init__(self, mode):
        super().__init__(CREDS, "s3", "us-east-1")
        self.mode = mode

    def payload(self, request):
        return self.mode or super().payload(request)


class Curl(S3SigV4Auth):
    """curl 7.88's --aws-sigv4: no x-amz-content-sha256, the empty hash."""
    def __init__(self):
        super().__init__(CREDS, "s3", "us-east-1")

    def _modify_request_before_signing(self, request):
        SigV4Auth._modify_request_before_signing(self, request)

    def payload(self, request):
        return EMPTY


class V2(HmacV1Auth):
    """SigV2's header, at a fixed time, signing mkv's sub-resources too."""
    QSAOfInterest = V2_SUBRES

    def __init__(self, t):
        super().__init__(CREDS)
        self.t = t

    def _get_date(self):
        return formatdate(self.t, usegmt=True)


class V2Query(HmacV1QueryAuth):
    QSAOfInterest = V2_SUBRES

    def __init__(self, t, expires):
        super().__init__(CREDS, expires)
        self.t = t

    def _get_date(self):
        return str(int(self.t + int(self._expires)))


def chunk_sigs(seed, amzdate, scope, datas):
    key = SECRET
    k = ("AWS4" + key).encode()
    for part in (amzdate[:8], "us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    prev, out = seed, []
    for d in datas:
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amzdate, scope, prev, EMPTY,
                         hashlib.sha256(d).hexdigest()])
        prev = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        out.append([d.hex(), prev])
    return out


def make(rnd):
    """One signed request: (case dict, kind)."""
    kind = rnd.choice(["sha", "unsigned", "trailer", "chunks", "curl", "presigned",
                       "v2", "v2query"])
    method = rnd.choice(["GET", "HEAD", "PUT", "POST", "DELETE"])
    raw = b"/" + b"/".join(rbytes(rnd, rnd.randint(1, 12)) for _ in range(rnd.randint(1, 3)))
    path = enc(raw, "/~")
    params = []
    for _ in range(rnd.choice([0, 0, 1, 2, 3, 4])):
        pool = rnd.choice([MKV_PARAMS, S3_PARAMS, None])
        if kind.startswith("v2") and pool is None:
            pool = ["x-id", "foo", "Bar"]
        name = rnd.choice(pool) if pool else enc(rbytes(rnd, rnd.randint(1, 6)), "-_.~")
        if name.startswith(("X-Amz-", "AWSAccessKeyId", "Signature", "Expires")):
            continue
        if kind.startswith("v2") and any(n == name for n, _ in params):
            continue   # SigV2 signs the first of a repeated name only
        # (botocore's SigV2 decodes a value as UTF-8: other bytes it signs as U+FFFD)
        value = rnd.choice([None, "", enc(rbytes(rnd, rnd.randint(1, 8), kind.startswith("v2")),
                                          "-_.~")])
        params.append((name, value))
        if rnd.random() < 0.15 and not kind.startswith("v2"):   # the same name again
            params.append((name, rnd.choice(["", "z", value or ""])))
    query = "&".join(n if v is None else "%s=%s" % (n, v) for n, v in params)
    t = now_of(rnd)
    headers = {"Host": HOST}
    for _ in range(rnd.randint(0, 3)):
        name = rnd.choice(["x-amz-meta-a", "X-Amz-Meta-Bee", "x-amz-storage-class", "Content-Type",
                           "Range", "X-Custom", "x-amz-copy-source", "Content-MD5"])
        if kind == "v2query" and name.lower().startswith("x-amz-"):
            continue   # botocore moves them into the query
        headers[name] = rnd.choice(["v", "a  b", " padded ", "tab\there", "x" * 40,
                                    "/bucket/k%20ey", "bytes=0-9"])
    body = rbytes(rnd, rnd.randint(0, 200)) if method in ("PUT", "POST") else b""
    datas = None
    url = "http://%s%s%s" % (HOST, path, "?" + query if query else "")
    if kind == "chunks":
        datas = [rbytes(rnd, rnd.randint(1, 64)) for _ in range(rnd.randint(1, 3))] + [b""]
        headers["Content-Encoding"] = "aws-chunked"
        headers["x-amz-decoded-content-length"] = str(sum(len(d) for d in datas))
        body = b""
    req = AWSRequest(method=method, url=url, headers=dict(headers),
                     data=b"" if kind == "presigned" else body)
    with Clock(t):
        if kind == "sha":
            Payload(None).add_auth(req)
        elif kind == "unsigned":
            Payload("UNSIGNED-PAYLOAD").add_auth(req)
        elif kind == "trailer":
            Payload("STREAMING-UNSIGNED-PAYLOAD-TRAILER").add_auth(req)
        elif kind == "chunks":
            Payload("STREAMING-AWS4-HMAC-SHA256-PAYLOAD").add_auth(req)
        elif kind == "curl":
            Curl().add_auth(req)
        elif kind == "presigned":
            S3SigV4QueryAuth(CREDS, "s3", "us-east-1", expires=rnd.choice([900, 3600, 604800])) \
                .add_auth(req)
        elif kind == "v2":
            V2(t).add_auth(req)
        else:
            V2Query(t, rnd.choice([900, 3600, 604800 - 700])).add_auth(req)
    p, _, q = req.url.split("//", 1)[1].partition("?")
    p = "/" + p.split("/", 1)[1] if "/" in p else "/"
    case = {"m": method, "p": p, "q": q if q or "?" in req.url else None,
            "h": [[k, v] for k, v in req.headers.items()], "now": T0,
            "body": body.hex() if kind in ("sha", "unsigned", "trailer", "curl") else None,
            "chunks": None, "ok": True, "what": kind}
    if kind == "chunks":
        auth = req.headers["Authorization"]
        seed = auth.rsplit("Signature=", 1)[1]
        amzdate = req.headers["X-Amz-Date"]
        case["chunks"] = chunk_sigs(seed, amzdate, "%s/us-east-1/s3/aws4_request" % amzdate[:8],
                                    datas)
    return case, kind


def hdr(case, name):
    for k, v in case["h"]:
        if k.lower() == name.lower():
            return v
    return None


def signed_names(case, kind):
    if kind == "presigned":
        q = dict(p.partition("=")[::2] for p in case["q"].split("&"))
        return q["X-Amz-SignedHeaders"].replace("%3B", ";").split(";")
    if kind.startswith("v2"):
        return [k.lower() for k, _ in case["h"]
                if k.lower() in ("content-md5", "content-type") or
                (k.lower() == "date" and kind == "v2") or
                k.lower().startswith("x-amz-")]
    return hdr(case, "Authorization").split("SignedHeaders=")[1].split(",")[0].split(";")


def edits(rnd, case, kind):
    """(edited case, must it verify?) for a few edits of case."""
    def copy(what):
        c = json.loads(json.dumps(case))
        c["what"] = "%s: %s" % (kind, what)
        return c
    out = []
    params = case["q"].split("&") if case["q"] else []
    auth_names = ("X-Amz-", "AWSAccessKeyId", "Signature", "Expires")
    v2 = kind.startswith("v2")

    def v2_signs(p):
        return p.partition("=")[0] in V2_SUBRES or p.startswith(auth_names)

    # a byte of the path
    c = copy("a byte of the path")
    raw = bytearray(c["p"].encode())
    i = rnd.randrange(1, len(raw))
    if raw[i] not in b"%/" and b"%" not in raw[max(i - 2, 0):i]:
        raw[i] = ord(rnd.choice([ch for ch in "AbZ09-" if ord(ch) != raw[i]]))
        c["p"] = raw.decode()
        out.append((c, False))
    # a parameter added: V4 signs it; V2 only its sub-resources
    name = rnd.choice([n for n in MKV_PARAMS + ["uploadId", "x-id", "foo"]
                       if not v2 or all(p.partition("=")[0] != n for p in params)])
    c = copy("parameter %s added" % name)
    c["q"] = "&".join(params + [name + rnd.choice(["", "=", "=1"])])
    out.append((c, v2 and name not in V2_SUBRES))
    if params:
        i = rnd.randrange(len(params))
        c = copy("parameter %s removed" % params[i])
        c["q"] = "&".join(params[:i] + params[i + 1:]) or None
        out.append((c, v2 and not v2_signs(params[i])))
        c = copy("parameter %s changed" % params[i])
        n, eq, v = params[i].partition("=")
        c["q"] = "&".join(params[:i] + [n + "=" + v + "x"] + params[i + 1:])
        out.append((c, v2 and not v2_signs(params[i])))
    # a signed header changed
    names = [n for n in signed_names(case, kind) if hdr(case, n) is not None]
    if names:
        n = rnd.choice(names)
        c = copy("signed header %s changed" % n)
        for h in c["h"]:
            if h[0].lower() == n:
                h[1] = h[1] + "x" if n != "host" else "127.0.0.2:3000"
        out.append((c, False))
    # an x-amz-* header added, unsigned
    c = copy("unsigned x-amz-copy-source")
    c["h"] = [h for h in c["h"] if h[0].lower() != "x-amz-copy-source"] + \
        [["X-Amz-Copy-Source", "/bucket/secret"]]
    out.append((c, False))
    # a header that is no x-amz-* and not signed: changes nothing
    c = copy("unsigned X-Other added")
    c["h"].append(["X-Other", "1"])
    out.append((c, True))
    # the body (a hex hash covers it), a chunk
    if case["body"] is not None:
        c = copy("the body")
        b = bytearray(bytes.fromhex(c["body"]) or b"\0")
        if c["body"]:
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
        c["body"] = bytes(b).hex()
        out.append((c, kind != "sha"))   # curl's body is unsigned (SPEC's rule)
    if case["chunks"]:
        c = copy("a chunk's data")
        ch = c["chunks"][0]
        d = bytearray(bytes.fromhex(ch[0]))
        d[rnd.randrange(len(d))] ^= 1
        ch[0] = bytes(d).hex()
        out.append((c, False))
        c = copy("a chunk's signature")
        ch = c["chunks"][-1]
        ch[1] = ("0" if ch[1][0] != "0" else "1") + ch[1][1:]
        out.append((c, False))
        if len(c["chunks"]) > 2:
            c = copy("chunks reordered")
            c["chunks"][0], c["chunks"][1] = c["chunks"][1], c["chunks"][0]
            out.append((c, c["chunks"][0][0] == c["chunks"][1][0]))
    # the date, the scope
    if kind == "presigned":
        c = copy("X-Amz-Date")
        i = c["q"].index("X-Amz-Date=") + len("X-Amz-Date=") + 13
        c["q"] = c["q"][:i] + "%02d" % ((int(c["q"][i:i + 2]) + 1) % 60) + c["q"][i + 2:]
        out.append((c, False))
        c = copy("the scope")
        c["q"] = c["q"].replace("us-east-1", "us-east-2", 1)
        out.append((c, False))
    elif not v2:
        c = copy("x-amz-date")
        for h in c["h"]:
            if h[0].lower() == "x-amz-date":
                h[1] = h[1][:-2] + ("%02dZ" % ((int(h[1][-3:-1]) + 1) % 60))
        out.append((c, False))
        c = copy("the scope")
        for h in c["h"]:
            if h[0] == "Authorization":
                h[1] = h[1].replace("/s3/", "/s4/", 1)
        out.append((c, False))
    elif kind == "v2":
        c = copy("Date")
        for h in c["h"]:
            if h[0] == "Date":
                h[1] = formatdate(T0 - 1, usegmt=True) if h[1] != formatdate(T0 - 1, usegmt=True) \
                    else formatdate(T0 - 2, usegmt=True)
        out.append((c, False))
    else:
        c = copy("Expires")
        c["q"] = "&".join(p if not p.startswith("Expires=") else "Expires=%d" %
                          (int(p[8:]) + 1) for p in params)
        out.append((c, False))
    # the method
    c = copy("the method")
    c["m"] = rnd.choice([m for m in ("GET", "PUT", "POST", "DELETE") if m != case["m"]])
    out.append((c, False))
    return out


def main():
    seed, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rnd = random.Random(seed)
    corpus = []
    with open(path, "w") as f:
        for _ in range(n):
            case, kind = make(rnd)
            f.write(json.dumps(case) + "\n")
            for c, ok in edits(rnd, case, kind):
                c["ok"] = ok
                f.write(json.dumps(c) + "\n")
            if not case["chunks"] and not any("\n" in v or "\r" in v for _, v in case["h"]):
                corpus.append(case)
    if len(sys.argv) > 5:
        d, k = sys.argv[4], int(sys.argv[5])
        os.makedirs(d, exist_ok=True)
        for i, c in enumerate(corpus[:k]):
            with open(os.path.join(d, "prop-%03d-%s" % (i, c["what"])), "w") as f:
                f.write("%s\n%s\n%s\n" % (c["m"], c["p"], c["q"] if c["q"] else "-"))
                for k2, v in c["h"]:
                    f.write("%s: %s\n" % (k2, v))


main()
