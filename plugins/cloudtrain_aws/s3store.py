"""``s3://`` object stores through boto3: Amazon S3, or any S3-compatible store (MinIO, Ceph,
OBS's S3 endpoint) named by ``endpoint``.  Registered by the aws plugin for every provider
(``cloudtrain_register_stores``); boto3 is imported when the store is first used."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Tuple

from cloudtrain.spec.errors import PlatformError
from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl, Progress

from .sdk import hint_for


class S3Store(ObjectStore):
    scheme = "s3"
    sdk_modules = ("boto3",)

    def __init__(self, client: Any = None, region: Optional[str] = None, endpoint: Optional[str] = None):
        """``client``: a boto3 S3 client (tests, an AWS provider's own); else one from boto3's
        default chain for ``region`` and ``endpoint``.  Its time-limited URLs are SigV4 (the
        signature every S3 region takes; SigV2 is refused by the newer ones), valid up to 7 days."""
        self.region, self.endpoint = region, endpoint
        self._client = client

    @property
    def where(self) -> str:
        client = self.client
        return f"{client.meta.endpoint_url}|{client.meta.region_name}"

    @property
    def client(self):
        if self._client is None:
            import boto3
            from botocore.config import Config
            from .sdk import AwsClients, aws_credentials
            session = boto3.session.Session()
            aws_credentials(session)  # MissingCredentials, naming where boto3 looked
            config = AwsClients.retry_config().merge(Config(signature_version="s3v4"))
            self._client = session.client("s3", region_name=self.region, endpoint_url=self.endpoint, config=config)
        return self._client

    @contextmanager
    def api(self, what: str):
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError
        try:
            yield
        except S3UploadFailedError as exc:  # upload_file's wrapper of the ClientError it met
            cause = exc.__context__
            if isinstance(cause, ClientError):
                err = cause.response.get("Error", {})
                code = str(err.get("Code", "?"))
                raise PlatformError(f"{what}: S3 refused: {code}: {err.get('Message', '')}; {hint_for(code)}") from None
            raise PlatformError(f"{what}: {exc}; check the network, the region and the endpoint") from None
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", "?"))
            raise PlatformError(f"{what}: S3 refused: {code}: {err.get('Message', '')}; {hint_for(code)}",
                                request_id=exc.response.get("ResponseMetadata", {}).get("RequestId")) from None
        except BotoCoreError as exc:
            raise PlatformError(f"{what}: {exc}; check the network, the region and the endpoint") from None

    def exists(self, url: ObjectUrl) -> bool:
        from botocore.exceptions import ClientError
        with self.api(f"look for {url}"):
            try:
                self.client.head_object(Bucket=url.bucket, Key=url.key)
                return True
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                    return False
                raise

    def put(self, url: ObjectUrl, data: bytes, content_type: str = "application/octet-stream") -> None:
        with self.api(f"upload {url}"):
            self.client.put_object(Bucket=url.bucket, Key=url.key, Body=data, ContentType=content_type)

    def put_file(self, url: ObjectUrl, path: Path, content_type: str = "application/octet-stream") -> None:
        """boto3's managed upload from the file: one PUT up to 64 MiB, parts of 16 MiB above it
        (a few parts in flight: bounded memory, and archives over S3's 5 GB single-PUT limit)."""
        from boto3.s3.transfer import TransferConfig
        config = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=16 << 20, max_concurrency=4)
        with self.api(f"upload {url}"):
            self.client.upload_file(str(path), url.bucket, url.key, ExtraArgs={"ContentType": content_type},
                                    Config=config)

    def objects(self, url: ObjectUrl) -> Iterator[Tuple[ObjectUrl, int]]:
        with self.api(f"list {url}"):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=url.bucket, Prefix=url.key)
            for page in pages:
                for item in page.get("Contents", ()):
                    yield ObjectUrl("s3", url.bucket, item["Key"]), int(item["Size"])

    def fetch(self, url: ObjectUrl, dest: Path, progress: Optional[Progress] = None) -> None:
        with self.api(f"download {url}"):
            self.client.download_file(url.bucket, url.key, str(dest), Callback=progress)

    def presign(self, url: ObjectUrl, seconds: int) -> str:
        with self.api(f"sign a URL for {url}"):
            return self.client.generate_presigned_url("get_object", Params={"Bucket": url.bucket, "Key": url.key},
                                                      ExpiresIn=int(seconds))
