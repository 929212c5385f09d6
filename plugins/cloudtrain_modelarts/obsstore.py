"""``obs://`` object stores through Huawei's official OBS SDK (``esdk-obs-python``, module ``obs``).

Registered by the modelarts plugin (``cloudtrain_register_stores``); ``obs`` is imported when a
store is first used.  Credentials are the ones the ModelArts providers use (``sdk.credentials``:
``HUAWEICLOUD_SDK_AK``/``_SK`` or the SDK's profile file).  The endpoint is the region's
``https://obs.<region>.myhuaweicloud.com``, or ``HUAWEICLOUD_SDK_REGION_OBS_<REGION>`` when set
(the Huawei Cloud SDKs' own override convention, e.g. a VPC endpoint; the tests' loopback double).

The OBS SDK answers HTTP errors with a result (``status``, ``errorCode``, ``errorMessage``,
``requestId``), not an exception: ``sdk.obs_result`` turns them into ``PlatformError`` (exit 3),
worded as every Huawei Cloud error is (``sdk``).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Iterator, Optional, Tuple

from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl, Progress

from . import sdk

ENDPOINT = "https://obs.{region}.myhuaweicloud.com"
ENDPOINT_ENV = "HUAWEICLOUD_SDK_REGION_OBS_{region}"  # region upper-cased, "-" -> "_"
PAGE = 1000  # listObjects' max_keys (OBS' maximum)


def endpoint_for(region: str) -> str:
    """The OBS endpoint of ``region`` (the override variable's value when it is set)."""
    override = os.environ.get(ENDPOINT_ENV.format(region=region.upper().replace("-", "_")))
    return override or ENDPOINT.format(region=region)


class ObsStore(ObjectStore):
    scheme = "obs"

    def __init__(self, client: Any = None, region: Optional[str] = None, endpoint: Optional[str] = None):
        """``client``: an ``obs.ObsClient`` (tests, embedding applications); else one for
        ``endpoint`` (default: ``region``'s, ``region`` defaulting to ``$HUAWEICLOUD_SDK_REGION``)."""
        self.region, self.endpoint = region, endpoint
        self._client = client

    @property
    def server(self) -> str:
        return self.endpoint or endpoint_for(sdk.region_of(self.region))

    @property
    def where(self) -> str:
        return self.server if self._client is None else f"{self._client.server}:{self._client.port}"

    @property
    def client(self):
        if self._client is None:
            obs = sdk.require("obs", "modelarts")
            creds = sdk.credentials("modelarts")
            # signature "obs": OBS' own (an IP address as server makes the SDK use path-style
            # requests and its S3-compatible v2 signature); no negotiation round trip
            self._client = obs.ObsClient(access_key_id=creds.ak, secret_access_key=creds.sk,
                                         security_token=getattr(creds, "security_token", None) or None,
                                         server=self.server, signature="obs", is_signature_negotiation=False,
                                         timeout=sdk.TIMEOUT[1], max_retry_count=sdk.RETRIES + 1)
        return self._client

    # -- ObjectStore ---------------------------------------------------------------------------
    def exists(self, url: ObjectUrl) -> bool:
        what = f"look for {url}"
        with sdk.obs_errors(self, what):
            return sdk.obs_result(self.client.getObjectMetadata(url.bucket, url.key), what, ok_missing=True) is not None

    def put(self, url: ObjectUrl, data: bytes, content_type: str = "application/octet-stream") -> None:
        obs = sdk.require("obs", "modelarts")
        what = f"upload {url}"
        with sdk.obs_errors(self, what):
            sdk.obs_result(self.client.putContent(url.bucket, url.key, data,
                                                  headers=obs.PutObjectHeader(contentType=content_type)), what)

    def put_file(self, url: ObjectUrl, path: Path, content_type: str = "application/octet-stream") -> None:
        """The SDK's ``putFile``: streamed from the file."""
        obs = sdk.require("obs", "modelarts")
        what = f"upload {url}"
        with sdk.obs_errors(self, what):
            sdk.obs_result(self.client.putFile(url.bucket, url.key, str(path),
                                               headers=obs.PutObjectHeader(contentType=content_type)), what)

    def objects(self, url: ObjectUrl) -> Iterator[Tuple[ObjectUrl, int]]:
        what = f"list {url}"
        marker = None
        while True:
            with sdk.obs_errors(self, what):
                page = sdk.obs_result(self.client.listObjects(url.bucket, prefix=url.key or None, marker=marker,
                                                              max_keys=PAGE), what).body
            contents = page.contents or []
            for item in contents:
                yield ObjectUrl(self.scheme, url.bucket, item.key), int(item.size or 0)
            if not page.is_truncated or not contents:
                return
            # OBS names the next marker; an S3-compatible store may leave it to the last key
            marker = page.next_marker or contents[-1].key

    def fetch(self, url: ObjectUrl, dest: Path, progress: Optional[Progress] = None) -> None:
        """The SDK calls ``progressCallback`` from a thread of its own (obs/progress.py), which
        may still be behind when ``getObject`` returns: the rest is reported here once the file
        is written, and the SDK's late calls are then ignored, so the bytes always add up."""
        what = f"download {url}"
        lock, moved, done = threading.Lock(), [0], [False]

        def report(transferred: int) -> None:
            with lock:
                if progress is not None and not done[0] and transferred > moved[0]:
                    progress(transferred - moved[0])
                    moved[0] = transferred

        def callback(transferred: int, total: int, seconds: float) -> None:  # the SDK's running total
            report(transferred)
        with sdk.obs_errors(self, what):
            sdk.obs_result(self.client.getObject(url.bucket, url.key, downloadPath=str(dest),
                                                 progressCallback=callback if progress else None), what)
        report(Path(dest).stat().st_size)
        with lock:
            done[0] = True

    def presign(self, url: ObjectUrl, seconds: int) -> str:
        with sdk.obs_errors(self, f"sign a URL for {url}"):
            return self.client.createSignedUrl("GET", url.bucket, url.key, expires=int(seconds)).signedUrl
