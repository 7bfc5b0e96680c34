#!/usr/bin/python3
"""Attacks on -keys' signatures (issue 41's review): signed requests and
presigned links edited by someone without the secret.  Each attack must be
refused, and nothing stored may change.
Usage: s3_attacks.py http://127.0.0.1:PORT WORKDIR, with S3_ADMIN=ID:SECRET
(every permission) and ATTACK=NAME (one of ATTACKS below) in the
environment.  Exits non-zero naming the first failure.  Run by check_keys.c."""
import http.client, os, shutil, sys, urllib.parse

END, WORK = sys.argv[1], sys.argv[2]
ADMIN = os.environ["S3_ADMIN"].split(":", 1)
BUCKET = "atk"
os.makedirs(WORK, exist_ok=True)


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def client(cred, **cfg):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=END, aws_access_key_id=cred[0],
                        aws_secret_access_key=cred[1], region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, **cfg))


def raw(method, url, body=b"", headers=None):
    """url sent byte for byte (requests and urllib re-encode a path's %XX)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request(method, u.path + ("?" + u.query if u.query else ""), body=body,
              headers=headers or {})
    r = c.getresponse()
    out = (r.status, r.read())
    c.close()
    return out


def value(s3, key):
    from botocore.exceptions import ClientError
    try:
        return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    except ClientError as e:
        return e.response["Error"]["Code"]


def renamed_params():
    """SigV4's canonical query decodes each parameter's name, so
    "upload%49d" signs as "uploadId"; but the router looks names up as
    sent.  With the names percent-encoded, presigned links (and captured
    header-signed requests) still verified and did something else:
    UploadPart became a PutObject of the whole key, AbortMultipartUpload a
    DeleteObject, ListParts a GetObject, GetBucketLocation a listing of the
    bucket.  Every case is tried; the failures are named together."""
    s3 = client(ADMIN)
    ps = client(ADMIN, signature_version="s3v4")
    bad = []
    s3.put_object(Bucket=BUCKET, Key="obj", Body=b"original")
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="obj")["UploadId"]
    part = ps.generate_presigned_url("upload_part", ExpiresIn=300, Params={
        "Bucket": BUCKET, "Key": "obj", "UploadId": up, "PartNumber": 1})
    st, body = raw("PUT", part.replace("uploadId=", "upload%49d=")
                   .replace("partNumber=", "partNumbe%72="), b"not a part")
    if st not in (400, 403, 404) or value(s3, "obj") != b"original":
        bad.append("an UploadPart link, names encoded: %d, the object now %r" %
                   (st, value(s3, "obj")))
        s3.put_object(Bucket=BUCKET, Key="obj", Body=b"original")
    lp = ps.generate_presigned_url("list_parts", ExpiresIn=300, Params={
        "Bucket": BUCKET, "Key": "obj", "UploadId": up})
    st, body = raw("GET", lp.replace("uploadId=", "upload%49d="))
    if st not in (400, 403, 404) or b"original" in body:
        bad.append("a ListParts link, name encoded, read the object: %d %r" % (st, body[:60]))
    loc = ps.generate_presigned_url("get_bucket_location", ExpiresIn=300,
                                    Params={"Bucket": BUCKET})
    st, body = raw("GET", loc.replace("?location", "?locatio%6E"))
    if st not in (400, 403, 404) or b"<Key>obj</Key>" in body:
        bad.append("a GetBucketLocation link, name encoded, listed the bucket: %d" % st)
    abort = ps.generate_presigned_url("abort_multipart_upload", ExpiresIn=300, Params={
        "Bucket": BUCKET, "Key": "obj", "UploadId": up})
    st, body = raw("DELETE", abort.replace("uploadId=", "upload%49d="))
    if st not in (400, 403, 404) or value(s3, "obj") != b"original":
        bad.append("an AbortMultipartUpload link, name encoded: %d, the object now %r" %
                   (st, value(s3, "obj")))
        s3.put_object(Bucket=BUCKET, Key="obj", Body=b"original")
    check(not bad, "; ".join(bad))
    # the links as made still work
    check(raw("PUT", part, b"a part")[0] == 200, "the UploadPart link")
    check(raw("DELETE", abort)[0] == 204, "the Abort link")


def plus_in_query():
    """SigV4's canonical query takes '+' as itself (%2B), the master's
    parameters take it as a space: "prefix=p%2Fa%2Bb" and "prefix=p%2Fa+b"
    sign alike but list different prefixes.  A presigned listing of
    "p/a+b" became one of "p/a b"."""
    s3 = client(ADMIN)
    s3.put_object(Bucket=BUCKET, Key="p/a+b", Body=b"plus")
    s3.put_object(Bucket=BUCKET, Key="p/a b", Body=b"space")
    u = client(ADMIN, signature_version="s3v4").generate_presigned_url(
        "list_objects_v2", Params={"Bucket": BUCKET, "Prefix": "p/a+b"}, ExpiresIn=300)
    st, body = raw("GET", u)
    check(st == 200 and b"a%2Bb" in body and b"a%20b" not in body, "the link: %d %s" % (st, body))
    check("a%2Bb" in u, "boto3 encodes '+' as %%2B: %s" % u)
    st, body = raw("GET", u.replace("a%2Bb", "a+b"))
    check(st in (400, 403) or b"a%20b" not in body,
          "a presigned listing of p/a+b, its %%2B made '+', listed p/a b: %d %s" % (st, body))


ATTACKS = {f.__name__: f for f in (renamed_params, plus_in_query)}

client(ADMIN).create_bucket(Bucket=BUCKET)
ATTACKS[os.environ["ATTACK"]]()
print("%s: ok" % os.environ["ATTACK"], flush=True)
shutil.rmtree(WORK, ignore_errors=True)
