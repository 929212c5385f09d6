"""The s3:// store through the real boto3 against moto in server mode (aws_double)."""
from __future__ import annotations

import urllib.request

import pytest

from cloudtrain.transfer import objectstore
from cloudtrain.spec.errors import PlatformError
from cloudtrain.transfer.objectstore import ObjectUrl

BUCKET = "ct-store"


@pytest.fixture
def store(aws_server, monkeypatch):
    aws = aws_server.fresh(monkeypatch, BUCKET)
    return aws, objectstore.open_store(ObjectUrl("s3", BUCKET), client=aws.client("s3"))


def test_the_registry_opens_the_s3_store(store):
    assert type(store[1]).__name__ == "S3Store"


def test_code_is_put_once_and_found_by_a_second_process(store):
    aws, s3 = store
    url = objectstore.code_url(ObjectUrl.parse(f"s3://{BUCKET}/code"), b"archive")
    assert objectstore.upload_once(s3, url, b"archive") is True
    objectstore.forget_uploads()
    assert objectstore.upload_once(s3, url, b"archive") is False
    # the double counts REST calls by method
    assert aws.calls[("s3", "S3.PUT")] == 1 and aws.calls[("s3", "S3.HEAD")] == 2
    body = aws.client("s3").get_object(Bucket=BUCKET, Key=url.key)
    assert body["Body"].read() == b"archive" and body["ContentType"] == "application/gzip"


def test_download_brings_every_object_under_the_prefix(store, tmp_path):
    aws, s3 = store
    client = aws.client("s3")
    for key in ("runs/j1/model.pt", "runs/j1/metrics/acc.json", "runs/j2/model.pt"):
        client.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
    written = objectstore.download(s3, ObjectUrl.parse(f"s3://{BUCKET}/runs/j1/"), tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == ["metrics/acc.json", "model.pt"]
    assert (tmp_path / "model.pt").read_bytes() == b"runs/j1/model.pt"


def test_a_presigned_url_reads_the_object_with_plain_http(store):
    aws, s3 = store
    url = ObjectUrl.parse(f"s3://{BUCKET}/code/a.tar.gz")
    s3.put(url, b"payload")
    signed = s3.presign(url, 600)
    assert "Signature" in signed or "X-Amz-Signature" in signed
    with urllib.request.urlopen(signed, timeout=10) as response:  # the loopback double
        assert response.read() == b"payload"


def test_a_missing_bucket_is_a_platform_error_with_the_fix(store):
    _, s3 = store
    with pytest.raises(PlatformError, match="NoSuchBucket.*create the bucket"):
        s3.put(ObjectUrl.parse("s3://no-such-bucket/x"), b"x")
