"""The workdir store (``cloudtrain_slurm.sdk.WorkdirStore``) with this machine as the cluster's
side: what ``put`` writes, ``objects`` lists (regular files, links not followed) and ``fetch``
reads back byte for byte; a path with spaces and shell words stays one argument."""
import hashlib
import os

import pytest

from cloudtrain.spec.errors import PlatformError
from cloudtrain.transfer.objectstore import ObjectUrl
from cloudtrain_slurm.sdk import Cluster, WorkdirStore


def store(tmp_path):
    workdir = tmp_path / "work dir $(touch pwned)"
    return WorkdirStore(Cluster(), str(workdir)), workdir


def test_what_is_put_is_listed_and_fetched_back_whole(tmp_path):
    s, workdir = store(tmp_path)
    data = os.urandom(300_000)
    s.put(ObjectUrl("slurm", "workdir", "code/a.tar.gz"), data)
    s.put(ObjectUrl("slurm", "workdir", "code/sub/b.txt"), b"b")
    (workdir / "code" / "link").symlink_to(tmp_path / "outside")  # a link: never listed
    (tmp_path / "outside").write_text("secret")
    listed = sorted((u.key, n) for u, n in s.objects(ObjectUrl("slurm", "workdir", "code/")))
    assert listed == [("code/a.tar.gz", 300_000), ("code/sub/b.txt", 1)]
    assert [(u.key, n) for u, n in s.objects(ObjectUrl("slurm", "workdir", "code/a.tar.gz"))] == \
        [("code/a.tar.gz", 300_000)]
    assert list(s.objects(ObjectUrl("slurm", "workdir", "nothing/"))) == []
    seen = []
    s.fetch(ObjectUrl("slurm", "workdir", "code/a.tar.gz"), tmp_path / "got" / "a", progress=seen.append)
    assert hashlib.sha256((tmp_path / "got" / "a").read_bytes()).digest() == hashlib.sha256(data).digest()
    assert seen == [300_000]
    assert not (tmp_path / "pwned").exists() and not (workdir.parent / "pwned").exists()


def test_fetching_what_is_not_there_is_one_platform_error(tmp_path):
    s, _ = store(tmp_path)
    with pytest.raises(PlatformError):
        s.fetch(ObjectUrl("slurm", "workdir", "missing"), tmp_path / "x")
