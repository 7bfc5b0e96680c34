#!/usr/bin/python3
"""Real S3 clients against a running mkv master: boto3, the aws CLI, rclone
and s3cmd.  Usage: s3_clients.py http://127.0.0.1:PORT [WORKDIR]
(https://: S3_CA=FILE is the CA each client verifies the master by, with
its own option: boto3 verify=, aws --ca-bundle, rclone --ca-cert, s3cmd
--ca-certs; tests/tls_clients.py)
Exits non-zero on the first failure, naming it.  Run by tests/check_s3.c
(on mkv-volumes and on nginx volumes)."""
import hashlib, os, shutil, subprocess, sys, tempfile

END = sys.argv[1]
WORK = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
CLIENTS = ("boto3", "aws", "rclone", "s3cmd")
# S3_CLIENTS=boto3,aws (development) runs only those; the others are said
# to be skipped, and a name that is no client's is an error, not a skip.
ONLY = os.environ.get("S3_CLIENTS", ",".join(CLIENTS)).split(",")
os.makedirs(WORK, exist_ok=True)
# The key the clients sign with: S3_KEY_ID and S3_SECRET (check_keys runs
# this suite against a master with -keys), else any.
KID = os.environ.get("S3_KEY_ID", "mkv")
SECRET = os.environ.get("S3_SECRET", "mkv")
ENV = dict(os.environ, AWS_ACCESS_KEY_ID=KID, AWS_SECRET_ACCESS_KEY=SECRET,
           AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
           AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
           HOME=WORK)
ENV.pop("AWS_CA_BUNDLE", None)   # rclone refuses plain http with it (NOTES.md)
ENV.pop("AWS_PROFILE", None)
CA = os.environ.get("S3_CA")
VERIFY = {"verify": CA} if CA else {}


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def run(args, **kw):
    p = subprocess.run(args, env=ENV, capture_output=True, text=True, timeout=300, **kw)
    check(p.returncode == 0, "%s -> %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p.stdout


def md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def tree(n, base, sizes=(0, 1, 1000, 70000)):
    for i in range(n):
        write(os.path.join(base, "d%d" % (i % 3), "f%03d" % i), os.urandom(sizes[i % len(sizes)]))


def boto3_tests():
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
    s3 = boto3.client("s3", endpoint_url=END, **VERIFY, aws_access_key_id=KID,
                      aws_secret_access_key=SECRET, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"},
                                    retries={"max_attempts": 2}))
    b = "boto"
    s3.create_bucket(Bucket=b)
    s3.head_bucket(Bucket=b)
    check(b in [x["Name"] for x in s3.list_buckets()["Buckets"]], "list_buckets shows the bucket")
    r = s3.put_object(Bucket=b, Key="a/b c+d&<x>.txt", Body=b"hello world")
    check(r["ETag"] == '"%s"' % hashlib.md5(b"hello world").hexdigest(), "put_object ETag")
    g = s3.get_object(Bucket=b, Key="a/b c+d&<x>.txt")
    check(g["Body"].read() == b"hello world", "get_object body")
    check(g["ContentLength"] == 11 and g["ETag"] == r["ETag"], "get_object headers")
    h = s3.head_object(Bucket=b, Key="a/b c+d&<x>.txt")
    check(h["ContentLength"] == 11 and h["ETag"] == r["ETag"], "head_object")
    rg = s3.get_object(Bucket=b, Key="a/b c+d&<x>.txt", Range="bytes=6-")
    check(rg["Body"].read() == b"world" and rg["ContentRange"] == "bytes 6-10/11", "ranged get")
    s3.put_object(Bucket=b, Key="a/b c+d&<x>.txt", Body=b"second")
    check(s3.get_object(Bucket=b, Key="a/b c+d&<x>.txt")["Body"].read() == b"second", "overwrite")
    s3.put_object(Bucket=b, Key="empty", Body=b"")
    check(s3.get_object(Bucket=b, Key="empty")["Body"].read() == b"", "empty object")
    try:
        s3.get_object(Bucket=b, Key="nope")
        check(False, "get of a missing key fails")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "NoSuchKey", "NoSuchKey, got %s" % e.response["Error"])
    try:
        s3.head_object(Bucket=b, Key="nope")
        check(False, "head of a missing key fails")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "404", "head 404")
    # listing: pagination and delimiter
    for i in range(25):
        s3.put_object(Bucket=b, Key="p/%02d" % i, Body=b"x" * i)
    s3.put_object(Bucket=b, Key="p/sub/one", Body=b"1")
    s3.put_object(Bucket=b, Key="p/sub/two", Body=b"2")
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="p/",
                                                           PaginationConfig={"PageSize": 7}):
        keys += [c["Key"] for c in page.get("Contents", [])]
        for c in page.get("Contents", []):
            if c["Key"] == "p/05":
                check(c["Size"] == 5 and c["LastModified"].year >= 2024, "Size/LastModified")
    check(keys == ["p/%02d" % i for i in range(25)] + ["p/sub/one", "p/sub/two"],
          "v2 pagination: %s" % keys)
    d = s3.list_objects_v2(Bucket=b, Prefix="p/", Delimiter="/")
    check([c["Prefix"] for c in d.get("CommonPrefixes", [])] == ["p/sub/"], "CommonPrefixes")
    check(d["KeyCount"] == 26, "KeyCount %s" % d["KeyCount"])
    top = s3.list_objects_v2(Bucket=b, Delimiter="/")
    check([c["Prefix"] for c in top["CommonPrefixes"]] == ["a/", "p/"] and
          [c["Key"] for c in top["Contents"]] == ["empty"], "top-level delimiter listing")
    k1 = []
    for page in s3.get_paginator("list_objects").paginate(Bucket=b, Prefix="p/",
                                                        PaginationConfig={"PageSize": 10}):
        k1 += [c["Key"] for c in page.get("Contents", [])]
    check(k1 == keys, "v1 pagination")
    s3.put_object(Bucket=b, Key="a/b c+d&<x>.txt", Body=b"third")
    dl = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "p/%02d" % i} for i in range(25)]
                                             + [{"Key": "never-existed"}]})
    check(len(dl["Deleted"]) == 26 and not dl.get("Errors"), "delete_objects %s" % dl)
    s3.delete_object(Bucket=b, Key="p/sub/one")
    s3.delete_object(Bucket=b, Key="p/sub/one")  # 204 again
    left = [c["Key"] for c in s3.list_objects_v2(Bucket=b, Prefix="p/").get("Contents", [])]
    check(left == ["p/sub/two"], "after deletes: %s" % left)
    # multipart: upload_file 100 MiB with the default TransferConfig, then download_file
    big = os.path.join(WORK, "big")
    with open(big, "wb") as f:
        for _ in range(100):
            f.write(os.urandom(1 << 20))
    s3.upload_file(big, b, "big/file")
    h = s3.head_object(Bucket=b, Key="big/file")
    check(h["ContentLength"] == 100 << 20 and h["ETag"].endswith('-13"'), "multipart ETag %s" % h["ETag"])
    back = os.path.join(WORK, "big.back")
    s3.download_file(b, "big/file", back)
    check(md5(back) == md5(big), "download_file matches")
    g = s3.get_object(Bucket=b, Key="big/file", Range="bytes=%d-%d" % (50 << 20, (50 << 20) + 9))
    with open(big, "rb") as f:
        f.seek(50 << 20)
        check(g["Body"].read() == f.read(10), "ranged get inside a multipart object")
    # explicit multipart calls: list parts, list uploads, abort
    up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    e1 = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"a" * (5 << 20))["ETag"]
    e2 = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=2, Body=b"b" * 10)["ETag"]
    check(e1 == '"%s"' % hashlib.md5(b"a" * (5 << 20)).hexdigest(), "part ETag")
    parts = s3.list_parts(Bucket=b, Key="mp", UploadId=up)["Parts"]
    check([(p["PartNumber"], p["Size"]) for p in parts] == [(1, 5 << 20), (2, 10)], "list_parts")
    ups = s3.list_multipart_uploads(Bucket=b).get("Uploads", [])
    check([u["UploadId"] for u in ups] == [up], "list_multipart_uploads")
    try:
        s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e2}]})
        check(False, "complete with a wrong ETag fails")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "InvalidPart", "InvalidPart")
    c = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    want = hashlib.md5(bytes.fromhex(e1.strip('"')) + bytes.fromhex(e2.strip('"'))).hexdigest()
    check(c["ETag"] == '"%s-2"' % want, "complete ETag")
    check(s3.get_object(Bucket=b, Key="mp")["Body"].read() == b"a" * (5 << 20) + b"b" * 10,
          "completed object")
    up2 = s3.create_multipart_upload(Bucket=b, Key="gone")["UploadId"]
    s3.upload_part(Bucket=b, Key="gone", UploadId=up2, PartNumber=1, Body=b"zz")
    s3.abort_multipart_upload(Bucket=b, Key="gone", UploadId=up2)
    try:
        s3.list_parts(Bucket=b, Key="gone", UploadId=up2)
        check(False, "list_parts after abort fails")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "NoSuchUpload", "NoSuchUpload")
    check(not s3.list_multipart_uploads(Bucket=b).get("Uploads"), "no uploads left")
    honest_tests(s3, b)
    print("boto3: ok", flush=True)


def error_of(fn, **kw):
    """(status, code) of a call expected to fail."""
    from botocore.exceptions import ClientError
    try:
        fn(**kw)
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"].get("Code")
    return 200, None


def with_headers(s3, headers, fn, **kw):
    """fn(**kw) with extra request headers (boto3 1.26 has no IfNoneMatch)."""
    def add(request, **_):
        for name, value in headers.items():
            request.headers[name] = value
    s3.meta.events.register("before-sign.s3", add)
    try:
        return error_of(fn, **kw)
    finally:
        s3.meta.events.unregister("before-sign.s3", add)


def honest_tests(s3, b):
    """docs/s3.md: what mkv does not do is refused, never a 200 that did
    something else; what it checks, it checks."""
    k = "honest/k"
    s3.put_object(Bucket=b, Key=k, Body=b"kept")
    for fn in (honest_refusals, honest_checksums, honest_conditions, honest_buckets,
               honest_v2, honest_unsigned, honest_edited, honest_complete_race):
        fn(s3, b, k)


def honest_refusals(s3, b, k):
    """encryption, object lock, ACL grants, tagging: refused, nothing written"""
    for what, kw in (("SSE-S3", {"ServerSideEncryption": "AES256"}),
                     ("SSE-C", {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}),
                     ("SSE-KMS", {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "x"}),
                     ("object lock", {"ObjectLockLegalHoldStatus": "ON"}),
                     ("public ACL", {"ACL": "public-read"}), ("grant", {"GrantRead": "id=x"}),
                     ("tagging", {"Tagging": "a=b"}), ("storage class", {"StorageClass": "GLACIER"})):
        st = error_of(s3.put_object, Bucket=b, Key=k, Body=b"changed", **kw)
        check(st[0] in (400, 501) and st[1], "put_object with %s: %s" % (what, st))
    check(s3.get_object(Bucket=b, Key=k)["Body"].read() == b"kept", "a refused put wrote")
    check(error_of(s3.create_multipart_upload, Bucket=b, Key=k, ServerSideEncryption="AES256")[0]
          == 501, "create_multipart_upload with SSE")
    check(error_of(s3.copy_object, Bucket=b, Key=k + "2", CopySource="%s/%s" % (b, k),
                   SSECustomerAlgorithm="AES256", SSECustomerKey="k" * 32)[0] == 501,
          "copy_object with SSE-C")
    check(error_of(s3.copy_object, Bucket=b, Key=k + "2",
                   CopySource={"Bucket": b, "Key": k, "VersionId": "v1"})[0] == 501,
          "copy_object of a version")
    s3.put_object(Bucket=b, Key=k, Body=b"kept", ACL="private")   # asks for nothing more
    g = s3.get_object(Bucket=b, Key=k, ResponseContentType="foo/bar",
                      ResponseContentDisposition="attachment", ResponseCacheControl="no-cache")
    h = g["ResponseMetadata"]["HTTPHeaders"]
    check((h["content-type"], h["content-disposition"], h["cache-control"]) ==
          ("foo/bar", "attachment", "no-cache"), "GetObject's response-* parameters: %s" % h)


def honest_checksums(s3, b, k):
    """x-amz-checksum-*: checked as the body streams, echoed"""
    import base64, zlib
    for alg, fn in (("CRC32", lambda d: zlib.crc32(d).to_bytes(4, "big")),
                    ("SHA1", lambda d: hashlib.sha1(d).digest()),
                    ("SHA256", lambda d: hashlib.sha256(d).digest())):
        good = base64.b64encode(fn(b"new value")).decode()
        st = error_of(s3.put_object, Bucket=b, Key=k, Body=b"new valuE", **{"Checksum" + alg: good})
        check(st == (400, "BadDigest"), "a wrong %s: %s" % (alg, st))
        check(s3.get_object(Bucket=b, Key=k)["Body"].read() == b"kept", "a bad %s wrote" % alg)
        r = s3.put_object(Bucket=b, Key=k + alg, Body=b"new value", **{"Checksum" + alg: good})
        check(r.get("Checksum" + alg) == good, "%s echoed: %s" % (alg, r.get("Checksum" + alg)))
    st = with_headers(s3, {"x-amz-checksum-crc32c": "AAAAAA=="}, s3.put_object, Bucket=b, Key=k,
                      Body=b"x")
    check(st == (400, "BadDigest"), "a wrong CRC32C: %s" % (st,))
    st = with_headers(s3, {"x-amz-checksum-crc32c": "4waSgw=="}, s3.put_object, Bucket=b,
                      Key=k + "crc32c", Body=b"123456789")   # CRC-32C's check value, e3069283
    check(st[0] == 200, "a right CRC32C: %s" % (st,))


def honest_conditions(s3, b, k):
    """conditional writes; a retried CompleteMultipartUpload"""
    st = with_headers(s3, {"If-None-Match": "*"}, s3.put_object, Bucket=b, Key=k, Body=b"no")
    check(st == (412, "PreconditionFailed"), "If-None-Match: * on an existing key: %s" % (st,))
    st = with_headers(s3, {"If-Match": '"%s"' % ("0" * 32)}, s3.put_object, Bucket=b, Key=k,
                      Body=b"no")
    check(st == (412, "PreconditionFailed"), "a wrong If-Match: %s" % (st,))
    check(s3.get_object(Bucket=b, Key=k)["Body"].read() == b"kept", "a failed condition wrote")
    et = s3.head_object(Bucket=b, Key=k)["ETag"]
    check(with_headers(s3, {"If-Match": et}, s3.put_object, Bucket=b, Key=k, Body=b"kept")[0]
          == 200, "a right If-Match")
    et = s3.head_object(Bucket=b, Key=k)["ETag"]
    check(with_headers(s3, {"If-None-Match": et}, s3.put_object, Bucket=b, Key=k, Body=b"no")
          == (412, "PreconditionFailed"), "If-None-Match naming the key's ETag")
    check(with_headers(s3, {"If-None-Match": "*"}, s3.put_object, Bucket=b, Key=k + "new",
                       Body=b"x")[0] == 200, "If-None-Match: * on a new key")
    up = s3.create_multipart_upload(Bucket=b, Key=k)["UploadId"]
    e1 = s3.upload_part(Bucket=b, Key=k, UploadId=up, PartNumber=1, Body=b"mp")["ETag"]
    mpu = {"Parts": [{"PartNumber": 1, "ETag": e1}]}
    st = with_headers(s3, {"If-None-Match": "*"}, s3.complete_multipart_upload, Bucket=b, Key=k,
                      UploadId=up, MultipartUpload=mpu)
    check(st == (412, "PreconditionFailed"), "complete with If-None-Match: * %s" % (st,))
    check(s3.get_object(Bucket=b, Key=k)["Body"].read() == b"kept", "a failed complete wrote")
    c1 = s3.complete_multipart_upload(Bucket=b, Key=k, UploadId=up, MultipartUpload=mpu)
    c2 = s3.complete_multipart_upload(Bucket=b, Key=k, UploadId=up, MultipartUpload=mpu)
    check(c1["ETag"] == c2["ETag"], "a retried complete: %s, %s" % (c1, c2))
    st = with_headers(s3, {"If-Match": '"%s"' % ("0" * 32)}, s3.delete_object, Bucket=b, Key=k)
    check(st == (412, "PreconditionFailed"), "DeleteObject with a wrong If-Match: %s" % (st,))
    check(s3.head_object(Bucket=b, Key=k)["ETag"] == c1["ETag"], "a failed condition deleted")


def honest_buckets(s3, b, k):
    """CreateBucket with a LocationConstraint (aws s3 mb outside us-east-1)"""
    s3.create_bucket(Bucket="honest-eu", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    check(s3.get_bucket_location(Bucket="honest-eu")["LocationConstraint"] == "eu-west-1",
          "the bucket's location")
    check(error_of(s3.create_bucket, Bucket="Not_Valid")[1] == "InvalidBucketName", "bucket names")


def honest_v2(s3, b, k):
    """signature version 2 on bucket URLs"""
    import boto3
    from botocore.config import Config
    v2 = boto3.client("s3", endpoint_url=END, **VERIFY, aws_access_key_id=KID, aws_secret_access_key=SECRET,
                      region_name="us-east-1", config=Config(signature_version="s3",
                                                             s3={"addressing_style": "path"}))
    v2.create_bucket(Bucket="honest-v2")
    v2.head_bucket(Bucket="honest-v2")
    check([o["Key"] for o in v2.list_objects(Bucket=b, Prefix=k + "new")["Contents"]] ==
          [k + "new"], "V2 ListObjects")
    v2.delete_bucket(Bucket="honest-v2")


def honest_unsigned(s3, b, k):
    """unsigned requests get S3's answers (with -keys: AccessDenied)"""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config
    anon = boto3.client("s3", endpoint_url=END, **VERIFY, region_name="us-east-1",
                        config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))
    if KID == "mkv":   # any signature, or none, is accepted
        check(anon.get_object(Bucket=b, Key=k)["Body"].read() ==
              s3.get_object(Bucket=b, Key=k)["Body"].read(), "unsigned GetObject")
        check(error_of(anon.get_object, Bucket=b, Key="nope") == (404, "NoSuchKey"),
              "unsigned GetObject of a missing key")
        check(b in [x["Name"] for x in anon.list_buckets()["Buckets"]], "unsigned ListBuckets")
    else:   # the anonymous line (check_keys.c's reads and lists /public/) decides
        st = error_of(anon.get_object, Bucket=b, Key=k)
        check(st == (403, "AccessDenied"), "unsigned get_object: %s" % (st,))
        st = error_of(anon.list_buckets)
        check(st == (403, "AccessDenied") or b not in [x["Name"] for x in
                                                       anon.list_buckets()["Buckets"]],
              "unsigned list_buckets: %s" % (st,))


def signed(method, path, query="", body=b"", headers=None, payload=None):
    """A request signed with SigV4 as a client would, then sent as built
    (query: its canonical form, sorted): (status, body)."""
    import datetime, hmac, http.client, urllib.parse
    u = urllib.parse.urlsplit(END)
    amzdate = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    payload = payload or hashlib.sha256(body).hexdigest()
    h = {k.lower(): v for k, v in (headers or {}).items()}
    h.update({"host": u.netloc, "x-amz-date": amzdate, "x-amz-content-sha256": payload})
    names = sorted(h)
    canon = "\n".join([method, path, query, "".join("%s:%s\n" % (n, h[n]) for n in names),
                       ";".join(names), payload])
    scope = amzdate[:8] + "/us-east-1/s3/aws4_request"
    key = ("AWS4" + SECRET).encode()
    for m in (amzdate[:8], "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, m.encode(), hashlib.sha256).digest()
    sts = "AWS4-HMAC-SHA256\n%s\n%s\n%s" % (amzdate, scope,
                                            hashlib.sha256(canon.encode()).hexdigest())
    h["authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        KID, scope, ";".join(names), hmac.new(key, sts.encode(), hashlib.sha256).hexdigest())
    if u.scheme == "https":
        import ssl
        c = http.client.HTTPSConnection(u.hostname, u.port, timeout=60,
                                         context=ssl.create_default_context(cafile=CA))
    else:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request(method, path + ("?" + query if query else ""), body=body, headers=h)
    r = c.getresponse()
    out = (r.status, r.read())
    c.close()
    return out


def honest_edited(s3, b, k):
    """requests edited as a client could send them: each refused, nothing changed"""
    import base64, zlib
    def kept(what):
        check(s3.get_object(Bucket=b, Key=k)["Body"].read() == b"kept", what + " changed the key")
    s3.put_object(Bucket=b, Key=k, Body=b"kept")
    obj = "/%s/%s" % (b, k)
    # DeleteObjects' body checked against its digests, as a PUT's is
    doc = ("<Delete><Object><Key>%s</Key></Object></Delete>" % k).encode()
    for name, value in (("Content-MD5", base64.b64encode(hashlib.md5(b"x").digest()).decode()),
                        ("x-amz-checksum-crc32", "AAAAAA==")):
        st = signed("POST", "/" + b, "delete=", doc, {name: value})
        check(st[0] == 400 and b"BadDigest" in st[1], "DeleteObjects, a wrong %s: %s" % (name, st))
        kept("DeleteObjects with a wrong " + name)
    st = signed("POST", "/" + b, "delete=", doc, {"x-amz-checksum-crc32": base64.b64encode(
        zlib.crc32(doc).to_bytes(4, "big")).decode()})
    check(st[0] == 200, "DeleteObjects, a right CRC32: %s" % (st,))
    s3.put_object(Bucket=b, Key=k, Body=b"kept")
    # a version named is not the object
    st = signed("POST", "/" + b, "delete=", doc.replace(b"</Key>", b"</Key><VersionId>v1</VersionId>"))
    check(st[0] == 501, "DeleteObjects of a version: %s" % (st,))
    kept("DeleteObjects of a version")
    # an aws-chunked body's trailer naming a checksum not checked here
    for trailer, code in (("x-amz-checksum-crc64nvme", 501), ("x-amz-checksum-crc32,x-amz-checksum-sha1", 400),
                          ("x-amz-checksum-md5", 400)):
        body = b"3\r\nnew\r\n0\r\n" + trailer.split(",")[0].encode() + b":AAAAAAAAAAA=\r\n\r\n"
        st = signed("PUT", obj, "", body, {"Content-Encoding": "aws-chunked", "x-amz-trailer": trailer,
                                           "x-amz-decoded-content-length": "3"},
                    "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        check(st[0] == code, "a PutObject whose trailer is %s: %s" % (trailer, st))
        kept("a PutObject whose trailer is " + trailer)
    # an aws-chunked body that is not the length it declared
    for declared in ("2", "10"):
        st = signed("PUT", obj, "", b"3\r\nnew\r\n0\r\n\r\n", {"Content-Encoding": "aws-chunked",
                    "x-amz-decoded-content-length": declared}, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        check(st[0] == 400 and b"IncompleteBody" in st[1],
              "3 bytes sent as x-amz-decoded-content-length %s: %s" % (declared, st))
        kept("a body not its declared length")
    # a copy of a range is UploadPartCopy's: CopyObject would copy it all
    st = signed("PUT", obj + "2", "", b"", {"x-amz-copy-source": obj, "x-amz-copy-source-range": "bytes=0-1"})
    check(st[0] == 400, "CopyObject with a range: %s" % (st,))
    check(error_of(s3.head_object, Bucket=b, Key=k + "2")[0] == 404, "CopyObject with a range wrote")
    # a parameter naming another operation
    for method, q in (("DELETE", "uploads="), ("DELETE", "partNumber=1"), ("PUT", "location=")):
        st = signed(method, obj, q, b"new" if method == "PUT" else b"")
        check(st[0] == 400, "%s ?%s: %s" % (method, q, st))
        kept("%s ?%s" % (method, q))
    # a CompleteMultipartUpload document cut short
    up = s3.create_multipart_upload(Bucket=b, Key=k)["UploadId"]
    e1 = s3.upload_part(Bucket=b, Key=k, UploadId=up, PartNumber=1, Body=b"p1")["ETag"]
    doc = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part><Part>" % e1
    st = signed("POST", obj, "uploadId=" + up, doc.encode())
    check(st[0] == 400 and b"MalformedXML" in st[1], "a Complete cut short: %s" % (st,))
    kept("a Complete cut short")
    s3.abort_multipart_upload(Bucket=b, Key=k, UploadId=up)


def honest_complete_race(s3, b, k):
    """a CompleteMultipartUpload retried while the first still runs (a
    client that timed out): every answer 200 with one ETag, the object
    whole (a racing retry once replaced it with an empty value)"""
    import threading
    up = s3.create_multipart_upload(Bucket=b, Key=k + "race")["UploadId"]
    parts = [{"PartNumber": n, "ETag": s3.upload_part(Bucket=b, Key=k + "race", UploadId=up,
                                                      PartNumber=n, Body=bytes([n]) * (5 << 20))["ETag"]}
             for n in (1, 2, 3)]
    out = []
    def complete():
        out.append(error_of(s3.complete_multipart_upload, Bucket=b, Key=k + "race", UploadId=up,
                            MultipartUpload={"Parts": parts}))
    threads = [threading.Thread(target=complete) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(all(st == (200, None) for st in out), "racing Completes: %s" % out)
    body = s3.get_object(Bucket=b, Key=k + "race")["Body"].read()
    check(body == b"".join(bytes([n]) * (5 << 20) for n in (1, 2, 3)),
          "after racing Completes the object holds %d bytes" % len(body))


def aws_tests():
    a = ["aws", "--endpoint-url", END] + (["--ca-bundle", CA] if CA else []) + ["s3"]
    src = os.path.join(WORK, "aws-src")
    tree(12, src)
    write(os.path.join(src, "big"), os.urandom(9 << 20))    # multipart (8 MiB parts)
    run(a + ["cp", os.path.join(src, "d0", "f000"), "s3://awsb/one"])
    run(a + ["cp", "s3://awsb/one", os.path.join(WORK, "one")])
    check(md5(os.path.join(WORK, "one")) == md5(os.path.join(src, "d0", "f000")), "aws cp round trip")
    run(a + ["sync", src, "s3://awsb/tree"])
    out = run(a + ["ls", "--recursive", "s3://awsb/tree/"])
    check(len(out.strip().splitlines()) == 13, "aws ls after sync:\n" + out)
    check(run(a + ["sync", src, "s3://awsb/tree"]).strip() == "", "second sync uploads nothing")
    dst = os.path.join(WORK, "aws-dst")
    run(a + ["sync", "s3://awsb/tree", dst])
    for root, _, files in os.walk(src):
        for f in files:
            p = os.path.join(root, f)
            check(md5(p) == md5(os.path.join(dst, os.path.relpath(p, src))), "aws sync down " + p)
    run(a + ["cp", "s3://awsb/tree/big", "s3://awsb/copied"])   # UploadPartCopy (> 8 MiB)
    run(a + ["cp", "s3://awsb/copied", os.path.join(WORK, "copied")])
    check(md5(os.path.join(WORK, "copied")) == md5(os.path.join(src, "big")), "aws cp s3 to s3")
    check("awsb" in run(a + ["ls"]), "aws s3 ls lists buckets")
    run(a + ["rm", "--recursive", "s3://awsb/"])
    check(run(a + ["ls", "--recursive", "s3://awsb/"]).strip() == "", "aws rm --recursive")
    print("aws: ok", flush=True)


def rclone_tests():
    conf = os.path.join(WORK, "rclone.conf")
    with open(conf, "w") as f:
        f.write("[mkv]\ntype = s3\nprovider = Other\naccess_key_id = %s\n"
                "secret_access_key = %s\nendpoint = %s\nregion = us-east-1\n" % (KID, SECRET, END))
    r = ["rclone", "--config", conf, "--retries", "1", "--low-level-retries", "2"]
    r += ["--ca-cert", CA] if CA else []
    src = os.path.join(WORK, "rc-src")
    tree(10, src)
    run(r + ["copy", src, "mkv:rcb/copy"])
    run(r + ["check", src, "mkv:rcb/copy"])
    os.remove(os.path.join(src, "d0", "f000"))
    write(os.path.join(src, "d1", "new"), b"new file")
    run(r + ["sync", src, "mkv:rcb/copy"])
    run(r + ["check", src, "mkv:rcb/copy"])
    out = run(r + ["ls", "mkv:rcb/copy"])
    check(len(out.strip().splitlines()) == 10, "rclone ls:\n" + out)
    dst = os.path.join(WORK, "rc-dst")
    run(r + ["sync", "mkv:rcb/copy", dst])
    run(r + ["check", src, dst])
    print("rclone: ok", flush=True)


def s3cmd_tests():
    host = END.split("://", 1)[1]
    c = ["s3cmd"] + (["--ssl", "--ca-certs", CA] if CA else ["--no-ssl"]) + ["--host", host, "--host-bucket", host, "--access_key", KID,
         "--secret_key", SECRET, "--config", "/dev/null", "--multipart-chunk-size-mb", "5"]
    f = os.path.join(WORK, "s3cmd-f")
    write(f, os.urandom(12 << 20))                  # multipart with 5 MiB chunks
    small = os.path.join(WORK, "s3cmd-small")
    write(small, b"small file")
    run(c + ["put", f, "s3://s3cb/big"])
    run(c + ["put", small, "s3://s3cb/dir/small"])
    out = run(c + ["ls", "s3://s3cb/"])
    check("s3://s3cb/big" in out and "s3://s3cb/dir/" in out, "s3cmd ls:\n" + out)
    run(c + ["get", "--force", "s3://s3cb/big", f + ".back"])
    check(md5(f + ".back") == md5(f), "s3cmd get")
    run(c + ["del", "s3://s3cb/big"])
    run(c + ["del", "s3://s3cb/dir/small"])
    check("s3cb/big" not in run(c + ["ls", "--recursive", "s3://s3cb/"]), "s3cmd del")
    print("s3cmd: ok", flush=True)


def installed(name):
    """Why the client cannot run, or None."""
    if name == "boto3":
        try:
            import boto3  # noqa: F401
            return None
        except ImportError as e:
            return "python3 cannot import boto3 (%s)" % e
    return None if shutil.which(name, path=ENV.get("PATH")) else "no %s in PATH" % name


unknown = [n for n in ONLY if n not in CLIENTS]
check(not unknown, "S3_CLIENTS names no client: %s (they are %s)" % (unknown, ", ".join(CLIENTS)))
# A client that is not installed fails the run: tools/deps.sh installs
# them all (python3-boto3, awscli, rclone, s3cmd).
for name in ONLY:
    why = installed(name)
    check(why is None, "%s cannot run: %s; tools/deps.sh installs it" % (name, why))
ran, skipped = [], [n for n in CLIENTS if n not in ONLY]
for name, fn in (("boto3", boto3_tests), ("aws", aws_tests), ("rclone", rclone_tests),
                 ("s3cmd", s3cmd_tests)):
    if name in ONLY:
        print("%s: running" % name, flush=True)
        fn()
        ran.append(name)
print("s3_clients: ran %s" % (", ".join(ran) or "none"), flush=True)
if skipped:
    print("s3_clients: SKIPPED %s (not in S3_CLIENTS=%s)" % (", ".join(skipped),
                                                             os.environ["S3_CLIENTS"]),
          flush=True)
shutil.rmtree(WORK, ignore_errors=True)
