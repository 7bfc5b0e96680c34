#!/usr/bin/python3
"""The real S3 clients against a master with -keys (docs/security.md):
each fails cleanly with a wrong secret, an unknown key and a read-only key
writing, and nothing stored changes; presigned GETs (boto3, aws presign,
s3cmd signurl) work with plain curl and give 403 once expired.
Usage: s3_keys.py http://127.0.0.1:PORT WORKDIR, with S3_ADMIN=ID:SECRET
(every permission) and S3_RO=ID:SECRET (read,list) in the environment.
Exits non-zero on the first failure, naming it.  Run by check_keys.c."""
import datetime, os, shutil, subprocess, sys, time, types

END, WORK = sys.argv[1], sys.argv[2]
ADMIN = os.environ["S3_ADMIN"].split(":", 1)
RO = os.environ["S3_RO"].split(":", 1)
WRONG = (ADMIN[0], "0" * 32)                 # a right id, a wrong secret
UNKNOWN = ("nosuchkey", ADMIN[1])
BUCKET, KEY, VALUE = "kb", "obj", b"the value that must stay"
os.makedirs(WORK, exist_ok=True)
BASE = dict(os.environ, AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
            AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null", HOME=WORK)
BASE.pop("AWS_CA_BUNDLE", None)
BASE.pop("AWS_PROFILE", None)


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def env(cred):
    return dict(BASE, AWS_ACCESS_KEY_ID=cred[0], AWS_SECRET_ACCESS_KEY=cred[1])


def run(args, cred, ok=True):
    p = subprocess.run(args, env=env(cred), capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    check((p.returncode == 0) == ok, "%s -> %d (want %s)\n%s" %
          (" ".join(args), p.returncode, "0" if ok else "non-zero", out))
    return out


def client(cred, **cfg):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=END, aws_access_key_id=cred[0],
                        aws_secret_access_key=cred[1], region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, **cfg))


def stored():
    """What the bucket holds, read with the admin key."""
    s3 = client(ADMIN)
    keys = [c["Key"] for c in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    return keys, s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read()


def curl(url):
    p = subprocess.run(["curl", "-s", "-o", os.path.join(WORK, "body"), "-w", "%{http_code}", url],
                       capture_output=True, text=True, timeout=60)
    with open(os.path.join(WORK, "body"), "rb") as f:
        return int(p.stdout), f.read()


def boto3_refused():
    from botocore.exceptions import ClientError
    for cred, code in ((WRONG, "SignatureDoesNotMatch"), (UNKNOWN, "InvalidAccessKeyId"),
                       (RO, "AccessDenied")):
        s3 = client(cred)
        for what, call in (("put_object", lambda: s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"x")),
                           ("delete_object", lambda: s3.delete_object(Bucket=BUCKET, Key=KEY)),
                           ("new key", lambda: s3.put_object(Bucket=BUCKET, Key="new", Body=b"x"))):
            try:
                call()
                check(False, "boto3 %s with %s succeeded" % (what, cred[0]))
            except ClientError as e:
                got = e.response["Error"]["Code"]
                check(got == code, "boto3 %s: %s, want %s" % (what, got, code))
    check(client(RO).get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == VALUE,
          "the read-only key reads")


def aws_refused():
    src = os.path.join(WORK, "f")
    with open(src, "wb") as f:
        f.write(b"x" * 100)
    for cred, code in ((WRONG, "SignatureDoesNotMatch"), (UNKNOWN, "InvalidAccessKeyId"),
                       (RO, "AccessDenied")):
        out = run(["aws", "--endpoint-url", END, "s3", "cp", src, "s3://%s/%s" % (BUCKET, KEY)],
                  cred, ok=False)
        check(code in out, "aws cp with %s says %s:\n%s" % (cred[0], code, out))
        out = run(["aws", "--endpoint-url", END, "s3", "rm", "s3://%s/%s" % (BUCKET, KEY)],
                  cred, ok=False)
        check(code in out, "aws rm with %s says %s:\n%s" % (cred[0], code, out))


def rclone_refused():
    src = os.path.join(WORK, "f")
    for cred, code in ((WRONG, "SignatureDoesNotMatch"), (UNKNOWN, "InvalidAccessKeyId"),
                       (RO, "AccessDenied")):
        conf = os.path.join(WORK, "rclone.conf")
        with open(conf, "w") as f:
            f.write("[k]\ntype = s3\nprovider = Other\naccess_key_id = %s\n"
                    "secret_access_key = %s\nendpoint = %s\nregion = us-east-1\n" % (cred[0], cred[1], END))
        r = ["rclone", "--config", conf, "--retries", "1", "--low-level-retries", "1",
             "--s3-no-check-bucket"]
        # rclone HEADs the object first: a HEAD's 403 has no body to name the code
        out = run(r + ["copyto", src, "k:%s/%s" % (BUCKET, KEY)], cred, ok=False)
        check(code in out or "status code: 403" in out,
              "rclone copyto with %s: 403 %s:\n%s" % (cred[0], code, out))
        # its HEAD's 403 makes it say "doesn't exist": a failure all the same
        run(r + ["deletefile", "k:%s/%s" % (BUCKET, KEY)], cred, ok=False)


def s3cmd(cred):
    host = END.split("://", 1)[1]
    return ["s3cmd", "--no-ssl", "--host", host, "--host-bucket", host, "--access_key", cred[0],
            "--secret_key", cred[1], "--config", "/dev/null"]


def s3cmd_refused():
    src = os.path.join(WORK, "f")
    for cred, code in ((WRONG, "SignatureDoesNotMatch"), (UNKNOWN, "InvalidAccessKeyId"),
                       (RO, "AccessDenied")):
        out = run(s3cmd(cred) + ["put", src, "s3://%s/%s" % (BUCKET, KEY)], cred, ok=False)
        check(code in out, "s3cmd put with %s says %s:\n%s" % (cred[0], code, out))
        out = run(s3cmd(cred) + ["del", "s3://%s/%s" % (BUCKET, KEY)], cred, ok=False)
        check(code in out, "s3cmd del with %s says %s:\n%s" % (cred[0], code, out))


def presigned():
    url = "%s/%s/%s" % (END, BUCKET, KEY)
    for sv in ("s3v4", None):   # None: boto3's default for S3 presigning, SigV2's query
        s3 = client(ADMIN, **({"signature_version": sv} if sv else {}))
        u = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": KEY},
                                      ExpiresIn=300)
        check(curl(u) == (200, VALUE), "boto3 presigned (%s) GET with curl: %s" % (sv, curl(u)))
        # made two hours ago, valid for 60 s: expired (no waiting).  Every
        # botocore signer's clock (awscrt's too, when installed) is set back.
        saved = []

        class Past(datetime.datetime):
            @classmethod
            def utcnow(cls):
                return datetime.datetime.utcnow() - datetime.timedelta(hours=2)

        DT = types.SimpleNamespace(**dict(vars(datetime), datetime=Past))
        T = types.SimpleNamespace(**dict(vars(time), time=lambda: time.time() - 7200))
        for name, mod in list(sys.modules.items()):
            if not name.startswith("botocore") or mod is None:
                continue
            for attr, shim, real in (("datetime", DT, datetime), ("time", T, time)):
                if getattr(mod, attr, None) is real:
                    saved.append((mod, attr, real))
                    setattr(mod, attr, shim)
            if hasattr(mod, "get_current_datetime"):
                real_now = mod.get_current_datetime
                saved.append((mod, "get_current_datetime", real_now))
                mod.get_current_datetime = lambda *a, f=real_now, **k: f(*a, **k) - \
                    datetime.timedelta(hours=2)
        try:
            old = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": KEY},
                                            ExpiresIn=60)
        finally:
            for mod, attr, real in saved:
                setattr(mod, attr, real)
        st, body = curl(old)
        check(st == 403 and b"<Code>AccessDenied</Code>" in body and b"expired" in body,
              "an expired presigned (%s) URL: %d %s" % (sv, st, body))
        bad = u.replace("Signature=", "Signature=0")
        check(curl(bad)[0] in (400, 403), "a presigned URL with a changed signature")
    out = run(["aws", "--endpoint-url", END, "s3", "presign", "s3://%s/%s" % (BUCKET, KEY),
               "--expires-in", "300"], ADMIN).strip()
    check(curl(out) == (200, VALUE), "aws s3 presign with curl")
    out = run(s3cmd(ADMIN) + ["signurl", "s3://%s/%s" % (BUCKET, KEY), "+300"], ADMIN).strip()
    check(curl(out) == (200, VALUE), "s3cmd signurl with curl: %s %s" % (out, curl(out)))
    # issue 41, finding 2: mkv's own parameters are signed in V2, its Expires capped
    st, body = curl(out.replace("?", "?list&locations&ttl=24h&", 1))
    check(st == 401 and b"keys" not in body, "a V2 link made a listing: %d %s" % (st, body))
    far = run(s3cmd(ADMIN) + ["signurl", "s3://%s/%s" % (BUCKET, KEY),
                              str(int(time.time()) + 10 * 365 * 86400)], ADMIN).strip()
    check(curl(far)[0] == 400, "a V2 link for ten years: %s" % (curl(far),))
    out = run(s3cmd(ADMIN) + ["signurl", "s3://%s/%s" % (BUCKET, KEY),
                              str(int(time.time()) - 10)], ADMIN).strip()
    check(curl(out)[0] == 403, "an expired s3cmd signurl")
    check(curl(url)[0] == 401, "an unsigned GET (the native API: 401)")


def curl_put(url, headers=(), data=None):
    args = ["curl", "-s", "-X", "PUT", "-o", os.path.join(WORK, "body"), "-w", "%{http_code}"]
    for h in headers:
        args += ["-H", h]
    args += ["--data-binary", data] if data is not None else ["-H", "Content-Length: 0"]
    p = subprocess.run(args + [url], capture_output=True, text=True, timeout=60)
    with open(os.path.join(WORK, "body"), "rb") as f:
        return int(p.stdout), f.read()


def unsigned_headers():
    """Issue 41, finding 1: an X-Amz-Copy-Source added to a presigned PUT
    or UploadPart link (which signs only host) does not make it a copy."""
    from botocore.exceptions import ClientError
    s3 = client(ADMIN, signature_version="s3v4")
    s3.put_object(Bucket="other", Key="secret", Body=b"secret bytes")
    up = s3.create_multipart_upload(Bucket="other", Key="mp")["UploadId"]
    links = [s3.generate_presigned_url("put_object", Params={"Bucket": "other", "Key": "link"},
                                       ExpiresIn=300),
             s3.generate_presigned_url("upload_part", ExpiresIn=300, Params={
                 "Bucket": "other", "Key": "mp", "UploadId": up, "PartNumber": 1}),
             client(ADMIN).generate_presigned_url(   # SigV2's query: x-amz-* are signed
                 "put_object", Params={"Bucket": "other", "Key": "link"}, ExpiresIn=300)]
    for u in links:
        st, body = curl_put(u, ["X-Amz-Copy-Source: /other/secret"])
        check(st == 403, "a presigned link with an unsigned X-Amz-Copy-Source: %d %s" % (st, body))
    check(b"There were headers present in the request which were not signed" in
          curl_put(links[0], ["X-Amz-Copy-Source: /other/secret"])[1], "S3's reason")
    try:
        s3.get_object(Bucket="other", Key="link")
        check(False, "the secret was copied under the link's key")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "NoSuchKey", "link: %s" % e)
    check(s3.list_parts(Bucket="other", Key="mp", UploadId=up).get("Parts", []) == [],
          "the secret was copied as a part")
    # the links themselves work
    check(curl_put(links[0], data="linked")[0] == 200, "the presigned PUT link")
    check(s3.get_object(Bucket="other", Key="link")["Body"].read() == b"linked", "its value")
    check(curl_put(links[1], data="part")[0] == 200, "the presigned UploadPart link")
    s3.abort_multipart_upload(Bucket="other", Key="mp", UploadId=up)


client(ADMIN).put_object(Bucket=BUCKET, Key=KEY, Body=VALUE)
before = stored()
for name, fn in (("boto3", boto3_refused), ("aws", aws_refused), ("rclone", rclone_refused),
                 ("s3cmd", s3cmd_refused), ("presigned", presigned),
                 ("unsigned headers", unsigned_headers)):
    print("%s: running" % name, flush=True)
    fn()
    check(stored() == before, "after %s, the bucket holds %s, not %s" % (name, stored(), before))
    print("%s: ok" % name, flush=True)
shutil.rmtree(WORK, ignore_errors=True)
