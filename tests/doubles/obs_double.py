"""An OBS endpoint on 127.0.0.1 for the real OBS SDK (``esdk-obs-python``): moto's S3 in server
mode behind a thin WSGI layer that checks what the SDK sends.

OBS speaks the S3 protocol (path-style requests and the S3 v2 signature when the SDK's server is
an IP address: ``obs.client._BasicClient._check_path_style`` forces path style for an IP, and a
path-style ``signature="obs"`` client signs ``v2``), so moto stores and serves the objects.  In
front of moto, every request must carry a valid v2 signature made with the test's key pair: the
``Authorization: AWS <AK>:<signature>`` header, or the ``AWSAccessKeyId``/``Expires``/``Signature``
query of a signed URL (which must not have expired).  The string to sign is the one of Amazon's
"Signing and authenticating REST requests" (S3 v2), computed here independently of the SDK.
``calls`` records (method, path, query) of every request that passed.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import threading
import time
from typing import List, Tuple
from urllib.parse import parse_qsl


from doubles.moto_double import MotoDouble

AK, SK = "AKTESTOBS00000000001", "obs-test-secret-key-0001"
logging.getLogger("werkzeug").setLevel(logging.ERROR)
# sub-resources that are part of the v2 string to sign (none of the SDK calls cloudtrain makes uses one)
SUBRESOURCES = {"acl", "delete", "lifecycle", "location", "logging", "notification", "partNumber", "policy",
                "requestPayment", "torrent", "uploadId", "uploads", "versionId", "versioning", "versions", "website",
                "response-content-type", "response-content-disposition"}


def string_to_sign(environ, date: str) -> str:
    """S3 v2: verb, Content-MD5, Content-Type, date (or Expires), x-amz-* headers, resource."""
    amz = sorted((k[5:].lower().replace("_", "-"), v.strip()) for k, v in environ.items()
                 if k.startswith("HTTP_X_AMZ_"))
    query = [(k, v) for k, v in parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
             if k in SUBRESOURCES]
    resource = environ.get("RAW_URI", environ.get("PATH_INFO", "/")).split("?")[0]  # as sent (encoded)
    if query:
        resource += "?" + "&".join(f"{k}={v}" if v else k for k, v in sorted(query))
    lines = [environ["REQUEST_METHOD"], environ.get("HTTP_CONTENT_MD5", ""), environ.get("CONTENT_TYPE", ""), date]
    lines += [f"{k}:{v}" for k, v in amz]
    return "\n".join(lines + [resource])


def sign(text: str, secret: str) -> str:
    return base64.b64encode(hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()).decode()


class ObsDouble(MotoDouble):
    """``with ObsDouble() as obs: obs.endpoint, obs.create_bucket("b"), obs.calls``"""

    def __init__(self, ak: str = AK, sk: str = SK):
        self.ak, self.sk = ak, sk
        self.calls: List[Tuple[str, str, str]] = []
        self.refused: List[str] = []
        self.lock = threading.Lock()

    def middleware(self, app):
        double = self

        def checked(environ, start_response):
            problem = double.auth_problem(environ, double.ak, double.sk)
            if problem:
                with double.lock:
                    double.refused.append(problem)
                body = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SignatureDoesNotMatch</Code>"
                        f"<Message>{problem}</Message><RequestId>req-obs-denied</RequestId></Error>").encode()
                start_response("403 Forbidden", [("Content-Type", "application/xml"),
                                                 ("x-amz-request-id", "req-obs-denied"),
                                                 ("Content-Length", str(len(body)))])
                return [body]
            with double.lock:
                double.calls.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                                     environ.get("QUERY_STRING", "")))
            return app(environ, start_response)
        return checked

    @staticmethod
    def auth_problem(environ, ak: str, sk: str) -> str:
        header = environ.get("HTTP_AUTHORIZATION", "")
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        if header:
            scheme, _, rest = header.partition(" ")
            access, _, signature = rest.partition(":")
            if scheme != "AWS" or access != ak:
                return f"not an S3 v2 signature with the test key: {scheme} {access}"
            date = "" if "HTTP_X_AMZ_DATE" in environ else environ.get("HTTP_DATE", "")
            expected = sign(string_to_sign(environ, date), sk)
        elif "Signature" in query:
            if query.get("AWSAccessKeyId") != ak:
                return "a signed URL of another key"
            if int(query.get("Expires", "0")) < time.time():
                return "the signed URL has expired"
            signature = query["Signature"]
            expected = sign(string_to_sign(environ, query["Expires"]), sk)
        else:
            return "an unsigned request"
        return "" if hmac.compare_digest(signature, expected) else f"bad signature for {environ['REQUEST_METHOD']} " \
                                                                   f"{environ.get('PATH_INFO')}"


    def reset(self) -> None:
        from moto.backends import get_backend
        for account in list(get_backend("s3").keys()):
            get_backend("s3")[account].reset()
        with self.lock:
            self.calls.clear()
            self.refused.clear()

    def client(self):
        """A client of the SDK for setting up and checking buckets (its calls are counted too)."""
        from obs import ObsClient
        return ObsClient(access_key_id=self.ak, secret_access_key=self.sk, server=self.endpoint, signature="obs",
                         is_signature_negotiation=False)

    def create_bucket(self, name: str) -> None:
        result = self.client().createBucket(name)
        assert result.status < 300, (result.errorCode, result.errorMessage)
        with self.lock:
            self.calls.clear()

    def object(self, bucket: str, key: str) -> bytes:
        result = self.client().getObject(bucket, key, loadStreamInMemory=True)
        assert result.status < 300, (result.errorCode, result.errorMessage)
        return result.body.buffer

    def count(self, method: str, path_part: str = "") -> int:
        with self.lock:
            return sum(1 for m, p, _ in self.calls if m == method and path_part in p)
