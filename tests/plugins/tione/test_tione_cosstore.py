"""The cos:// object store drives the real COS SDK (qcloud_cos) over HTTP against a COS double on
127.0.0.1 (cos_double.py) that checks each request's host, its COS signature and Content-MD5."""
import urllib.request

import pytest
from tencentcloud.common.credential import Credential

from cloudtrain.transfer import objectstore
from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.transfer.objectstore import ObjectUrl, code_url, download, upload_once
from doubles.cos_double import REGION, SECRET_ID, SECRET_KEY, CosDouble

from cloudtrain_tione.cosstore import CosStore, endpoint_settings

BUCKET = "train-1250000000"


@pytest.fixture
def cos():
    with CosDouble(buckets=(BUCKET,), page_size=2) as server:
        yield server
    assert not server.bad_requests, server.bad_requests


def store(cos, key=SECRET_KEY, region=REGION):
    return CosStore(region=region, credential=Credential(SECRET_ID, key), endpoint=cos.url)


def test_put_exists_list_and_fetch_through_the_sdk(cos, tmp_path):
    s = store(cos)
    url = ObjectUrl("cos", BUCKET, "runs/a/model.bin")
    assert s.exists(url) is False
    s.put(url, b"weights", "application/octet-stream")
    assert cos.objects[(BUCKET, "runs/a/model.bin")] == b"weights"
    assert s.exists(url) is True
    for name in ("runs/a/log.txt", "runs/a/sub/x", "runs/b/other", "runs/a/z"):
        s.put(ObjectUrl("cos", BUCKET, name), name.encode())
    # four objects under runs/a/, pages of two: the store follows the marker
    found = dict((u.key, size) for u, size in s.objects(ObjectUrl("cos", BUCKET, "runs/a/")))
    assert found == {"runs/a/model.bin": 7, "runs/a/log.txt": 14, "runs/a/sub/x": 12, "runs/a/z": 8}
    assert sum(1 for m, _, key in cos.calls if m == "GET" and key == "") == 2  # 4 keys, 2 a page, last not truncated
    moved = []
    s.fetch(url, tmp_path / "m.bin", moved.append)
    assert (tmp_path / "m.bin").read_bytes() == b"weights" and sum(moved) == 7
    assert not (tmp_path / "m.bin.part").exists()


def test_upload_once_sends_the_same_code_once(cos):
    objectstore.forget_uploads()
    data = b"\x1f\x8b code archive"
    url = code_url(ObjectUrl.parse(f"cos://{BUCKET}/team/code"), data)
    assert url.key.startswith("team/code/cloudtrain-code/") and url.key.endswith(".tar.gz")
    assert upload_once(store(cos), url, data) is True
    objectstore.forget_uploads()  # another process: it asks COS, which has the object
    assert upload_once(store(cos), url, data) is False
    assert cos.puts() == [url.key] and cos.count("HEAD") == 2


def test_download_keeps_the_paths_under_the_prefix(cos, tmp_path):
    cos.objects.update({(BUCKET, "runs/j1/model.pt"): b"m", (BUCKET, "runs/j1/logs/a.txt"): b"aa",
                        (BUCKET, "runs/j2/model.pt"): b"other job"})
    written = download(store(cos), ObjectUrl.parse(f"cos://{BUCKET}/runs/j1/"), tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == ["logs/a.txt", "model.pt"]
    assert (tmp_path / "out" / "logs" / "a.txt").read_bytes() == b"aa"


def test_a_presigned_url_reads_the_object_with_a_plain_get(cos):
    cos.objects[(BUCKET, "code/x.tar.gz")] = b"archive"
    url = store(cos).presign(ObjectUrl("cos", BUCKET, "code/x.tar.gz"), 600)
    assert "q-signature=" in url and "x.tar.gz" in url and SECRET_KEY not in url
    with urllib.request.urlopen(url, timeout=10) as resp:  # no SDK, no credentials
        assert resp.read() == b"archive"


def test_refusals_name_the_fix(cos):
    with pytest.raises(PlatformError, match=r"COS refused: NoSuchBucket: .*check the bucket \(cos://BUCKETNAME-APPID"):
        store(cos).put(ObjectUrl("cos", "missing-1250000000", "k"), b"x")
    with pytest.raises(PlatformError, match=r"COS refused: SignatureDoesNotMatch: .*TENCENTCLOUD_SECRET_KEY"):
        store(cos, key="wrong-key").put(ObjectUrl("cos", BUCKET, "k"), b"x")
    assert cos.puts() == ["k", "k"] and (BUCKET, "k") not in cos.objects
    assert len(cos.bad_requests) == 1 and "does not verify" in cos.bad_requests[0]
    cos.bad_requests.clear()


def test_the_region_is_needed(monkeypatch):
    monkeypatch.delenv("TENCENTCLOUD_REGION", raising=False)
    with pytest.raises(BadInput, match="COS needs the bucket's region: set providers.tione.region"):
        CosStore(credential=Credential(SECRET_ID, SECRET_KEY)).exists(ObjectUrl("cos", BUCKET, "k"))


def test_the_tione_plugin_registers_the_cos_scheme():
    assert objectstore.store_class("cos") is CosStore
    assert objectstore.stores()["cos"] == ("cloudtrain_tione.cosstore:CosStore", "tione")


def test_endpoint_settings():
    assert endpoint_settings("http://127.0.0.1:9000") == {"Scheme": "http", "IP": "127.0.0.1", "Port": 9000}
    assert endpoint_settings("cos.ap-shanghai.myqcloud.com") == {"Scheme": "https",
                                                                 "Endpoint": "cos.ap-shanghai.myqcloud.com"}
    assert endpoint_settings(None) == {}
