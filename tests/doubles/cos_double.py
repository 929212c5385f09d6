"""A COS (Tencent Cloud Object Storage) double on 127.0.0.1 for the real ``qcloud_cos`` SDK.

moto does not fit: COS addresses a bucket by virtual host (``BUCKET-APPID.cos.REGION.myqcloud.com``,
the SDK's ``IP``/``Port`` settings put it in the ``Host`` header) and signs with its own
``q-sign-algorithm=sha1`` scheme.  This double serves what cloudtrain uses -- HEAD, PUT and GET
of an object, GET Bucket (ListObjects, paged with ``marker``) -- and refuses (recording it in
``bad_requests``) any request that

- names a host that is not a COS bucket host of the double's region,
- lacks an ``Authorization`` (or presigned query) whose signature verifies with the test secret
  key -- recomputed here independently, from the COS documentation's algorithm ("请求签名":
  SignKey = HMAC-SHA1(SecretKey, KeyTime); HttpString = method, path, sorted params, sorted
  headers; StringToSign = sha1, KeyTime, SHA1(HttpString); Signature = HMAC-SHA1(SignKey, it)),
- PUTs a body whose ``Content-MD5`` is missing or wrong.

Objects live in ``objects[(bucket, key)]``; ``calls`` records (method, bucket, key) of each
request; ``page_size`` caps a listing page so that paging is exercised.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
import time
import uuid
from typing import Dict, List, Optional, Tuple
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

from loopback import LoopbackServer, QuietHandler

SECRET_ID, SECRET_KEY = "AKIDcloudtraintest0000000000000000", "cloudtrain-test-secret-key-00000000"
REGION = "ap-shanghai"
HOST = re.compile(r"^(?P<bucket>[a-z0-9][a-z0-9-]*-\d+)\.cos\.(?P<region>[a-z0-9-]+)\.myqcloud\.com$")
SIGNED = ("q-sign-algorithm", "q-ak", "q-sign-time", "q-key-time", "q-header-list", "q-url-param-list", "q-signature")


def encode(value: str) -> str:
    return quote(value, safe="-_.~")


def cos_signature(secret_key: str, key_time: str, method: str, path: str, params: Dict[str, str],
                  headers: Dict[str, str]) -> str:
    """The q-signature of a request (params and headers: the signed ones, names lowercased)."""
    def joined(items: Dict[str, str]) -> str:
        return "&".join(f"{encode(k).lower()}={encode(v)}" for k, v in sorted(
            ((encode(k).lower(), v) for k, v in items.items())))
    http_string = f"{method.lower()}\n{path}\n{joined(params)}\n{joined(headers)}\n"
    to_sign = f"sha1\n{key_time}\n{hashlib.sha1(http_string.encode()).hexdigest()}\n"
    sign_key = hmac.new(secret_key.encode(), key_time.encode(), hashlib.sha1).hexdigest()
    return hmac.new(sign_key.encode(), to_sign.encode(), hashlib.sha1).hexdigest()


class CosDouble(LoopbackServer):
    poll_interval = 0.02

    def __init__(self, buckets=("train-1250000000",), region: str = REGION, page_size: int = 1000):
        self.lock = threading.Lock()
        self.region, self.page_size = region, page_size
        self.buckets = set(buckets)
        self.objects: Dict[Tuple[str, str], bytes] = {}
        self.calls: List[Tuple[str, str, str]] = []
        self.bad_requests: List[str] = []
        super().__init__(self._handler())

    def puts(self) -> List[str]:
        return [key for method, _, key in self.calls if method == "PUT"]

    def count(self, method: str) -> int:
        return sum(1 for m, _, _ in self.calls if m == method)

    # -- checks -----------------------------------------------------------------------------
    def bucket_of(self, host: str) -> Optional[str]:
        name = host.rsplit(":", 1)[0]
        found = HOST.match(name)
        if found and found["region"] == self.region:
            return found["bucket"]
        if name == "127.0.0.1" and len(self.buckets) == 1:
            return next(iter(self.buckets))  # a presigned URL made for the IP endpoint
        return None

    def auth_problem(self, method: str, path: str, query: Dict[str, str], headers) -> Optional[str]:
        fields = query if "q-signature" in query else dict(parse_qsl(headers.get("Authorization", ""),
                                                                     keep_blank_values=True))
        if not all(name in fields for name in SIGNED):
            return "no COS signature (Authorization header or presigned query)"
        if fields["q-sign-algorithm"] != "sha1" or fields["q-ak"] != SECRET_ID:
            return f"signed by {fields['q-ak']!r} with {fields['q-sign-algorithm']!r}"
        start, _, end = fields["q-key-time"].partition(";")
        if not (int(start) <= time.time() <= int(end)):
            return "the signature has expired"
        lowered = {k.lower(): v for k, v in headers.items()}
        signed_headers = {}
        for name in filter(None, fields["q-header-list"].split(";")):
            value = lowered.get(name)
            if value is None:
                return f"signed header {name} is not in the request"
            signed_headers[name] = value.rsplit(":", 1)[0] if name == "host" else value
        params = {k.lower(): v for k, v in query.items() if k not in SIGNED}
        signed_params = {name: params.get(name, "") for name in filter(None, fields["q-url-param-list"].split(";"))}
        want = cos_signature(SECRET_KEY, fields["q-key-time"], method, path, signed_params, signed_headers)
        return None if hmac.compare_digest(want, fields["q-signature"]) else "the signature does not verify"

    # -- HTTP ---------------------------------------------------------------------------------
    def _handler(self):
        double = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def answer(self, code: int, body: bytes = b"", content_type: str = "application/xml",
                       headers: Optional[dict] = None, head: bool = False) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("x-cos-request-id", uuid.uuid4().hex)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def error(self, code: int, name: str, message: str, head: bool = False) -> None:
                # COS's error body: Code, Message, Resource, RequestId, TraceId
                body = (f"<?xml version='1.0' encoding='utf-8' ?><Error><Code>{name}</Code><Message>"
                        f"{escape(message)}</Message><Resource>{escape(self.headers.get('Host', ''))}"
                        f"{escape(urlsplit(self.path).path)}</Resource><RequestId>{uuid.uuid4().hex}</RequestId>"
                        f"<TraceId>{uuid.uuid4().hex}</TraceId></Error>").encode()
                self.answer(code, body, head=head)

            def serve(self, method: str) -> None:
                parts = urlsplit(self.path)
                key = unquote(parts.path)[1:]
                query = dict(parse_qsl(parts.query, keep_blank_values=True))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                head = method == "HEAD"
                bucket = double.bucket_of(self.headers.get("Host", ""))
                with double.lock:
                    double.calls.append((method, bucket or "?", key))
                if bucket is None:
                    double.bad_requests.append(f"{method} {self.path}: Host {self.headers.get('Host')!r}")
                    return self.error(400, "InvalidURI", "not a bucket host of this region", head)
                problem = double.auth_problem(method, "/" + key, query, self.headers)
                if problem:
                    double.bad_requests.append(f"{method} {self.path}: {problem}")
                    return self.error(403, "SignatureDoesNotMatch", problem, head)
                if bucket not in double.buckets:
                    return self.error(404, "NoSuchBucket", f"{bucket} does not exist", head)
                if method == "PUT":
                    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
                    if self.headers.get("Content-MD5") != md5:
                        double.bad_requests.append(f"PUT {key}: Content-MD5 {self.headers.get('Content-MD5')!r}")
                        return self.error(400, "InvalidDigest", "Content-MD5 missing or wrong")
                    with double.lock:
                        double.objects[(bucket, key)] = body
                    return self.answer(200, headers={"ETag": f'"{hashlib.md5(body).hexdigest()}"'})
                if not key:
                    return self.list(bucket, query)
                data = double.objects.get((bucket, key))
                if data is None:
                    return self.error(404, "NoSuchKey", f"{key} does not exist", head)
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", f'"{hashlib.md5(data).hexdigest()}"')
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            def list(self, bucket: str, query: Dict[str, str]) -> None:
                prefix, marker = query.get("prefix", ""), query.get("marker", "")
                limit = min(int(query.get("max-keys") or 1000), double.page_size)
                keys = sorted(k for b, k in double.objects if b == bucket and k.startswith(prefix) and k > marker)
                page, more = keys[:limit], len(keys) > limit
                items = "".join(f"<Contents><Key>{encode(k)}</Key><Size>{len(double.objects[(bucket, k)])}</Size>"
                                f"<ETag>&quot;x&quot;</ETag><StorageClass>STANDARD</StorageClass></Contents>"
                                for k in page)
                body = (f"<?xml version='1.0' encoding='utf-8' ?><ListBucketResult><Name>{bucket}</Name>"
                        f"<EncodingType>url</EncodingType><Prefix>{encode(prefix)}</Prefix>"
                        f"<Marker>{encode(marker)}</Marker><MaxKeys>{limit}</MaxKeys>"
                        f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{items}</ListBucketResult>")
                self.answer(200, body.encode())

            def do_HEAD(self):
                self.serve("HEAD")

            def do_GET(self):
                self.serve("GET")

            def do_PUT(self):
                self.serve("PUT")

        return Handler
