"""cloudtrain.transfer.objectstore: the parts every provider's code upload and output download share.

The store here keeps objects in a dict: what is tested is core's logic (which objects are sent,
where files land, what a missing plugin says), not a platform; the real SDKs are tested against
their loopback doubles in each plugin's tests (tests/plugins/aws/test_s3store.py, ...)."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cloudtrain.transfer import objectstore
from cloudtrain.spec.errors import BadInput
from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl


class DictStore(ObjectStore):
    scheme = "mem"

    def __init__(self):
        self.data, self.puts, self.heads = {}, 0, 0
        self.lock = threading.Lock()

    def exists(self, url):
        with self.lock:
            self.heads += 1
        return str(url) in self.data

    def put(self, url, data, content_type="application/octet-stream"):
        with self.lock:
            self.puts += 1
        self.data[str(url)] = data

    def objects(self, url):
        for key, data in sorted(self.data.items()):
            if key.startswith(str(url)):
                yield ObjectUrl.parse(key), len(data)

    def fetch(self, url, dest, progress=None):
        data = self.data[str(url)]
        Path(dest).write_bytes(data)
        if progress:
            progress(len(data))


@pytest.fixture(autouse=True)
def _fresh():
    objectstore.forget_uploads()
    yield
    objectstore.forget_uploads()


def test_urls_parse_and_compose():
    url = ObjectUrl.parse("cos://train-1250000000/code/")
    assert (url.scheme, url.bucket, url.key) == ("cos", "train-1250000000", "code/")
    assert str(url.child("cloudtrain-code", "x.tar.gz")) == "cos://train-1250000000/code/cloudtrain-code/x.tar.gz"
    assert str(ObjectUrl.parse("s3://b").child("k")) == "s3://b/k"
    for bad in ("team-data/runs", "s3://", "s3:///key", "s3://bucket /x"):
        with pytest.raises(BadInput, match="SCHEME://BUCKET/PREFIX"):
            ObjectUrl.parse(bad)


def test_code_url_is_named_by_the_archives_sha256():
    import hashlib
    url = objectstore.code_url(ObjectUrl.parse("s3://b/runs"), b"archive")
    assert url.key == f"runs/cloudtrain-code/{hashlib.sha256(b'archive').hexdigest()}.tar.gz"


def test_upload_once_sends_new_code_once_and_existing_code_never():
    store = DictStore()
    url = objectstore.code_url(ObjectUrl.parse("mem://b/p"), b"v1")
    assert objectstore.upload_once(store, url, b"v1") is True
    assert objectstore.upload_once(store, url, b"v1") is False  # remembered: not even asked again
    assert (store.puts, store.heads) == (1, 1)
    objectstore.forget_uploads()  # another process: asks, finds it, sends nothing
    assert objectstore.upload_once(store, url, b"v1") is False
    assert (store.puts, store.heads) == (1, 2)


def test_concurrent_uploads_of_the_same_code_send_it_once():
    store = DictStore()
    url = objectstore.code_url(ObjectUrl.parse("mem://b/p"), b"v1")
    threads = [threading.Thread(target=objectstore.upload_once, args=(store, url, b"v1")) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.puts == 1 and store.heads == 1


def test_download_keeps_paths_below_the_prefix(tmp_path):
    store = DictStore()
    store.data = {"mem://b/runs/job1/model.pt": b"m", "mem://b/runs/job1/logs/a.txt": b"a",
                  "mem://b/runs/job1/logs/": b"", "mem://b/runs/job2/other": b"x"}
    written = objectstore.download(store, ObjectUrl.parse("mem://b/runs/job1/"), tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == ["logs/a.txt", "model.pt"]
    assert (tmp_path / "model.pt").read_bytes() == b"m"


def test_download_of_nothing_says_so(tmp_path):
    with pytest.raises(BadInput, match="nothing is stored under mem://b/none"):
        objectstore.download(DictStore(), ObjectUrl.parse("mem://b/none"), tmp_path)


def test_an_object_named_to_escape_the_destination_is_refused(tmp_path):
    store = DictStore()
    store.data = {"mem://b/runs/../../etc/passwd": b"x"}
    with pytest.raises(BadInput, match="outside the destination"):
        objectstore.download(store, ObjectUrl.parse("mem://b/runs/"), tmp_path / "d")
    assert not (tmp_path / "etc").exists()


def test_a_scheme_no_plugin_registers_names_the_install():
    from cloudtrain.extend import plugins
    plugins.disable("tione")  # its plugin blocked: cos:// has no store, the built-in table the hint
    try:
        assert "cos" not in objectstore.stores()
        with pytest.raises(BadInput, match=r"pip install 'cloudtrain\[tione\]'"):
            objectstore.store_class("cos")
        with pytest.raises(BadInput, match="install the plugin that brings it"):
            objectstore.store_class("gs")
    finally:
        plugins._disabled.discard("tione")
        plugins.reset()


def test_the_aws_plugin_registers_s3_without_importing_boto3():
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "CLOUDTRAIN_PLUGINS"}  # the built-in plugins only
    code = ("import sys; from cloudtrain.transfer import objectstore; "
            "print(objectstore.stores()['s3'][0]); print('boto3' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout.split()
    assert out == ["cloudtrain_aws.s3store:S3Store", "False"]
