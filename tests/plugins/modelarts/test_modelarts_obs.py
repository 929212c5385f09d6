"""``obs://`` object stores: ``ObsStore`` through the real OBS SDK (``esdk-obs-python``) over HTTP
against obs_double.py (moto's S3 behind a check of every request's S3 v2 signature)."""
import io
import os
import time
import urllib.error
import urllib.request

import pytest

import cloudtrain_modelarts.obsstore as obsstore
from cloudtrain.transfer import objectstore
from cloudtrain.spec.errors import EXIT_PLATFORM, BadInput, PlatformError
from cloudtrain.transfer.objectstore import ObjectUrl, download, upload_once
from cloudtrain_modelarts.obsstore import ObsStore, endpoint_for
from doubles.obs_double import AK, SK, ObsDouble

BUCKET = "team-obs"


@pytest.fixture(scope="module")
def double():
    with ObsDouble() as server:
        yield server


@pytest.fixture
def obs(double, monkeypatch, tmp_path):
    double.reset()
    objectstore.forget_uploads()
    double.create_bucket(BUCKET)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.huaweicloud profile from this machine
    monkeypatch.setenv("HUAWEICLOUD_SDK_AK", AK)
    monkeypatch.setenv("HUAWEICLOUD_SDK_SK", SK)
    monkeypatch.setenv("HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4", double.endpoint)
    return double


def store():
    return ObsStore(region="cn-north-4")


def url(key):
    return ObjectUrl("obs", BUCKET, key)


def test_the_plugin_registers_obs_and_the_endpoint_is_the_regions():
    assert objectstore.store_class("obs") is ObsStore
    # Seed 001 (the Lite guide's manifest): OPEN_SCRIPT_ADDRESS "https://mtest-bucket.obs.{region-id}.
    # myhuaweicloud.com/acc/rank", a bucket's virtual-hosted name on its region's OBS endpoint
    # (render.OPEN_SCRIPT keeps that line); the store talks to the endpoint itself.
    from cloudtrain_modelarts.render import OPEN_SCRIPT
    region = "cn-southwest-2"
    assert OPEN_SCRIPT.format(region=region).startswith(endpoint_for(region).replace("https://", "https://mtest-bucket."))
    assert endpoint_for(region) == "https://obs.cn-southwest-2.myhuaweicloud.com"


def test_put_exists_and_a_content_addressed_upload_happens_once(obs):
    data = b"archive bytes"
    target = objectstore.code_url(url("team"), data)
    assert not store().exists(target)
    assert upload_once(store(), target, data) is True
    assert obs.object(BUCKET, target.key) == data
    obs.calls.clear()
    assert upload_once(store(), target, data) is False                 # the same process: nothing sent
    assert obs.calls == []
    objectstore.forget_uploads()                                        # another process: one look, no upload
    assert upload_once(store(), target, data) is False
    assert [m for m, _, _ in obs.calls] == ["HEAD"]
    assert obs.refused == []                                            # every request was signed with the key


def test_objects_pages_through_a_prefix_with_markers(obs, monkeypatch):
    for i in range(5):
        store().put(url(f"runs/r1/f{i}.txt"), b"x" * i)
    store().put(url("runs/other.txt"), b"not under r1")
    monkeypatch.setattr(obsstore, "PAGE", 2)
    obs.calls.clear()
    found = list(store().objects(url("runs/r1/")))
    assert found == [(url(f"runs/r1/f{i}.txt"), i) for i in range(5)]
    lists = [q for m, p, q in obs.calls if m == "GET" and p == f"/{BUCKET}"]
    assert len(lists) == 3 and "marker=" not in lists[0] and all("marker=" in q for q in lists[1:])


def test_download_writes_every_object_below_the_prefix_with_progress(obs, tmp_path):
    big = os.urandom(5 << 20)
    store().put(url("runs/r2/model/weights.bin"), big)
    store().put(url("runs/r2/metrics.json"), b'{"acc": 0.97}')

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    term = Terminal()
    written = download(store(), url("runs/r2"), tmp_path / "out", stream=term)
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == ["metrics.json", "model/weights.bin"]
    assert (tmp_path / "out" / "model" / "weights.bin").read_bytes() == big
    total = (len(big) + 13) / 1e6
    assert term.getvalue().rstrip().endswith(f"downloading {total:.1f}/{total:.1f} MB")   # the SDK's callbacks add up
    with pytest.raises(BadInput, match="nothing is stored under obs://team-obs/runs/none"):
        download(store(), url("runs/none"), tmp_path / "none")


def test_a_presigned_url_is_a_plain_get_that_expires(obs):
    store().put(url("code/archive.tar.gz"), b"payload")
    signed = store().presign(url("code/archive.tar.gz"), 60)
    assert SK not in signed
    assert urllib.request.urlopen(signed, timeout=10).read() == b"payload"   # no credentials on the client
    with pytest.raises(urllib.error.HTTPError) as tampered:
        urllib.request.urlopen(signed.replace("archive", "other"), timeout=10)
    assert tampered.value.code == 403
    expired = store().presign(url("code/archive.tar.gz"), 1)
    time.sleep(2.1)
    with pytest.raises(urllib.error.HTTPError) as late:
        urllib.request.urlopen(expired, timeout=10)
    assert late.value.code == 403 and "expired" in obs.refused[-1]


def test_refusals_are_platform_errors_with_the_request_id_and_no_secret(obs, monkeypatch):
    monkeypatch.setenv("HUAWEICLOUD_SDK_SK", "a-wrong-secret-key-42")
    with pytest.raises(PlatformError) as info:
        store().put(url("x"), b"x")
    text = str(info.value)
    assert "OBS refused to upload obs://team-obs/x: SignatureDoesNotMatch" in text and "(HTTP 403)" in text
    assert info.value.request_id == "req-obs-denied" and info.value.exit_code == EXIT_PLATFORM
    assert "a-wrong-secret-key-42" not in text
    monkeypatch.setenv("HUAWEICLOUD_SDK_SK", SK)
    with pytest.raises(PlatformError, match=r"OBS refused to upload obs://no-such-bucket/x: NoSuchBucket: "
                                            r".*\(HTTP 404\); check the bucket's name"):
        store().put(ObjectUrl("obs", "no-such-bucket", "x"), b"x")


def test_an_unreachable_endpoint_is_a_platform_error(obs, monkeypatch):
    monkeypatch.setenv("HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4", "http://127.0.0.1:9")
    started = time.monotonic()
    with pytest.raises(PlatformError, match=r"cannot reach OBS at http://127.0.0.1:9 to look for obs://team-obs/x"):
        store().exists(url("x"))
    assert time.monotonic() - started < 30



def test_progress_adds_up_when_the_sdks_callback_thread_lags(tmp_path):
    """esdk-obs-python reports progress from a thread of its own (obs/progress.py), which can
    still be behind when getObject returns (seen: a 5.2 MB download's line ended at 4.7 MB).
    A client that reports only part before returning, and the rest late, must still add up."""
    import threading
    from types import SimpleNamespace
    late = []

    class LaggingClient:
        def getObject(self, bucket, key, downloadPath, progressCallback):
            with open(downloadPath, "wb") as f:
                f.write(b"x" * 1000)
            progressCallback(400, 1000, 0.1)
            late.append(threading.Timer(0.2, progressCallback, args=(1000, 1000, 0.3)))
            late[-1].start()
            return SimpleNamespace(status=200, body=None, errorCode=None, errorMessage=None, requestId="r")

    seen = []
    ObsStore(client=LaggingClient()).fetch(url("a/b.bin"), tmp_path / "b.bin", seen.append)
    assert sum(seen) == 1000  # reported by the time fetch returns
    late[0].join()
    assert sum(seen) == 1000  # and the SDK's late call adds nothing
