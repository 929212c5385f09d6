"""``cos://BUCKET-APPID/prefix`` object stores through Tencent's official COS SDK
(``cos-python-sdk-v5``, module ``qcloud_cos``).  Registered by the tione plugin
(``cloudtrain_register_stores``); the SDK is imported when a store is first used.

Credentials are TI-ONE's: the Tencent Cloud default chain (``sdk.default_credential``),
whose credential object the COS SDK reads as its ``CredentialInstance``.  The region is the
bucket's (``providers.tione.region``, else ``$TENCENTCLOUD_REGION``).  ``CLOUDTRAIN_COS_ENDPOINT``
(``http://127.0.0.1:PORT``) sends every request to that address, with the bucket's own host in
the ``Host`` header, as the SDK's ``IP``/``Port`` settings do.
"""
from __future__ import annotations

import ipaddress
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Tuple
from urllib.parse import urlsplit

from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl, Progress

from .sdk import COS_ENDPOINT_VAR, api_error, sdk_errors

REGION_VAR = "TENCENTCLOUD_REGION"
CHUNK = 1 << 20

def endpoint_settings(endpoint: Optional[str]) -> dict:
    """``CosConfig`` settings for an endpoint: ``http://127.0.0.1:9000`` -> Scheme, IP, Port (the
    bucket's host goes in the Host header); ``cos.ap-shanghai.myqcloud.com`` -> Endpoint."""
    if not endpoint:
        return {}
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    try:
        ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return {"Scheme": parts.scheme, "Endpoint": parts.netloc}
    return {"Scheme": parts.scheme, "IP": parts.hostname, **({"Port": parts.port} if parts.port else {})}

class CosStore(ObjectStore):
    scheme = "cos"

    def __init__(self, client: Any = None, region: Optional[str] = None, credential: Any = None,
                 endpoint: Optional[str] = None):
        """``client``: a ``CosS3Client`` (tests, embedding applications); else one for
        ``region`` with ``credential`` (a Tencent Cloud credential; default: the SDK's chain)
        and ``endpoint`` (default: ``$CLOUDTRAIN_COS_ENDPOINT``, else COS's own per region)."""
        self._client, self._credential = client, credential
        self.region = region or os.environ.get(REGION_VAR)
        self.endpoint = endpoint or os.environ.get(COS_ENDPOINT_VAR)

    @property
    def where(self) -> str:
        return f"{self.endpoint or 'cos'}|{self.region}"

    @property
    def client(self):
        if self._client is None:
            if not self.region:
                raise BadInput(f"COS needs the bucket's region: set providers.tione.region or export {REGION_VAR} "
                               "(e.g. ap-shanghai)")
            from .sdk import require_sdk
            require_sdk("qcloud_cos")
            from qcloud_cos import CosConfig, CosS3Client
            credential = self._credential
            if credential is None:
                from .sdk import default_credential
                with self.api("read the Tencent Cloud credentials"):
                    credential = default_credential()
            config = CosConfig(Region=self.region, CredentialInstance=credential, Timeout=60,
                               **endpoint_settings(self.endpoint))
            self._client = CosS3Client(config)
        return self._client

    @contextmanager
    def api(self, what: str):
        """The SDKs' errors inside as ``sdk.api_error``'s one line."""
        try:
            yield
        except sdk_errors() as exc:
            raise api_error(exc, what, service="COS") from None

    def exists(self, url: ObjectUrl) -> bool:
        from qcloud_cos.cos_exception import CosServiceError
        client = self.client
        with self.api(f"look for {url}"):
            try:
                client.head_object(Bucket=url.bucket, Key=url.key)
                return True
            except CosServiceError as exc:
                if exc.get_status_code() == 404:
                    return False
                raise

    def put(self, url: ObjectUrl, data: bytes, content_type: str = "application/octet-stream") -> None:
        client = self.client
        with self.api(f"upload {url}"):
            client.put_object(Bucket=url.bucket, Key=url.key, Body=data, ContentType=content_type, EnableMD5=True)

    def put_file(self, url: ObjectUrl, path: Path, content_type: str = "application/octet-stream") -> None:
        """One PUT with the open file as its body: the SDK reads it in chunks (its MD5 too)."""
        client = self.client
        with self.api(f"upload {url}"), open(path, "rb") as body:
            client.put_object(Bucket=url.bucket, Key=url.key, Body=body, ContentType=content_type, EnableMD5=True)

    def objects(self, url: ObjectUrl) -> Iterator[Tuple[ObjectUrl, int]]:
        client = self.client
        marker = ""
        while True:
            with self.api(f"list {url}"):
                page = client.list_objects(Bucket=url.bucket, Prefix=url.key, Marker=marker, MaxKeys=1000)
            for item in page.get("Contents", ()):
                yield ObjectUrl("cos", url.bucket, item["Key"]), int(item["Size"])
            if str(page.get("IsTruncated", "false")).lower() != "true":
                return
            # NextMarker is given with a delimiter only; otherwise the last key is the marker
            marker = page.get("NextMarker") or page["Contents"][-1]["Key"]

    def fetch(self, url: ObjectUrl, dest: Path, progress: Optional[Progress] = None) -> None:
        client = self.client
        part = Path(f"{dest}.part")
        with self.api(f"download {url}"):
            body = client.get_object(Bucket=url.bucket, Key=url.key)["Body"]
            got = 0
            with open(part, "wb") as out:
                for chunk in body.get_stream(CHUNK):
                    out.write(chunk)
                    got += len(chunk)
                    if progress is not None:
                        progress(len(chunk))
        if len(body) and got != len(body):
            part.unlink()
            raise PlatformError(f"download {url}: got {got} of {len(body)} bytes; try again")
        part.replace(dest)

    def presign(self, url: ObjectUrl, seconds: int) -> str:
        client = self.client
        with self.api(f"sign a URL for {url}"):
            return client.get_presigned_url(Bucket=url.bucket, Key=url.key, Method="GET", Expired=int(seconds))
