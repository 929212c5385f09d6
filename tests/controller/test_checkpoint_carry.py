"""The checkpoint carried between providers' stores (``cloudtrain.orchestrate.checkpoints``): every
object under the prefix, checked by sha256 after it arrived; ``validate`` says where a checkpoint
cannot travel, before anything is sent."""
import shutil
from pathlib import Path

import pytest

from cloudtrain.input.loading import job_from_dict
from cloudtrain.orchestrate import checkpoints
from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl
from conftest import run_cli, write_job


class DirStore(ObjectStore):
    """A directory as an object store (``dir://bucket/key`` -> ROOT/bucket/key): what the interface
    asks of a store, on a file system."""

    scheme = "dir"

    def __init__(self, root: Path):
        self.root = root

    def path(self, url):
        return self.root / url.bucket / url.key

    def exists(self, url):
        return self.path(url).is_file()

    def put(self, url, data, content_type="application/octet-stream"):
        self.path(url).parent.mkdir(parents=True, exist_ok=True)
        self.path(url).write_bytes(data)

    def put_file(self, url, path, content_type="application/octet-stream"):
        self.path(url).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, self.path(url))

    def objects(self, url):
        base = self.root / url.bucket
        for found in sorted(base.rglob("*")):
            key = found.relative_to(base).as_posix() + ("/" if found.is_dir() else "")
            if key.startswith(url.key) and (found.is_file() or not any(found.iterdir())):
                yield ObjectUrl(url.scheme, url.bucket, key), found.stat().st_size if found.is_file() else 0

    def fetch(self, url, dest, progress=None):
        shutil.copyfile(self.path(url), dest)


class FlippingStore(DirStore):
    """A store that changes what it is given (a bit flipped in transit)."""

    def put_file(self, url, path, content_type="application/octet-stream"):
        data = bytearray(Path(path).read_bytes())
        data[len(data) // 2] ^= 1
        self.put(url, bytes(data))


def filled(tmp_path):
    source = DirStore(tmp_path / "a")
    source.put(ObjectUrl("dir", "b", "ckpt/run/model.pt"), b"\x00weights" * 100_000)
    source.put(ObjectUrl("dir", "b", "ckpt/run/meta/epoch.json"), b'{"epoch": 3}')
    source.put(ObjectUrl("dir", "b", "ckpt/run-other/not-this.pt"), b"another run's")
    (tmp_path / "a" / "b" / "ckpt" / "run" / "empty").mkdir()  # a folder marker
    return source


def test_every_object_under_the_prefix_arrives_byte_for_byte(tmp_path):
    source, target = filled(tmp_path), DirStore(tmp_path / "z")
    done = checkpoints.carry(source, ObjectUrl.parse("dir://b/ckpt/run/"), target, ObjectUrl.parse("dir://c/to/"))
    assert sorted(p.relative_to(tmp_path / "z").as_posix() for p in (tmp_path / "z").rglob("*") if p.is_file()) == [
        "c/to/meta/epoch.json", "c/to/model.pt"]
    assert (tmp_path / "z" / "c" / "to" / "model.pt").read_bytes() == b"\x00weights" * 100_000
    assert [f for f, _, _ in done.files] == ["meta/epoch.json", "model.pt"] and done.size == 800_012
    assert str(done).endswith("2 file(s), 800012 bytes, sha256 checked")


def test_a_checkpoint_changed_on_the_way_stops_the_move(tmp_path):
    source, target = filled(tmp_path), FlippingStore(tmp_path / "z")
    with pytest.raises(checkpoints.CheckpointNotCarried, match=r"dir://c/to/meta/epoch.json arrived with sha256 "):
        checkpoints.carry(source, ObjectUrl.parse("dir://b/ckpt/run/"), target, ObjectUrl.parse("dir://c/to/"))


def job(checkpoint):
    return job_from_dict({"name": "j", "command": "python t.py", "image": "img",
                          "storage": {"checkpoint": checkpoint} if checkpoint else {}})


@pytest.mark.parametrize("here,there,said", [
    ("./ckpt", "s3://team/ckpt/", "local's checkpoint is a path on a machine (./ckpt): it stays on the machine"),
    ("pvc://claim/ckpt", "s3://team/ckpt/", "kubeflow's checkpoint is a Kubernetes claim (pvc://claim/ckpt)"),
    ("s3://team/ckpt/", None, "azure keeps no checkpoint (its storage.checkpoint is not set)"),
    ("s3://team/ckpt/", "gs://team/ckpt/", "azure's checkpoint gs://team/ckpt/ cannot be read from here: "
                                           "no installed plugin reads gs:// object stores"),
])
def test_validate_says_where_a_checkpoint_cannot_travel(here, there, said):
    first = "local" if here.startswith(".") else "kubeflow" if here.startswith("pvc") else "sagemaker"
    second = "sagemaker" if first != "sagemaker" else "azure"
    [problem] = checkpoints.problems([(first, job(here)), (second, job(there))])
    assert problem.startswith(f"a checkpoint cannot travel from {first} to {second}: {said}")
    assert problem.endswith(f"an attempt moved to {second} starts from the beginning")


def test_stores_that_can_carry_it_or_share_it_are_no_problem():
    assert checkpoints.problems([("sagemaker", job("s3://a/ckpt/")), ("ec2", job("s3://a/ckpt/"))]) == []
    assert checkpoints.problems([("sagemaker", job("s3://a/ckpt/")), ("tione", job("cos://b-125/ckpt/")),
                                 ("modelarts", job("obs://c/ckpt/"))]) == []
    assert checkpoints.problems([("sagemaker", job(None)), ("azure", job(None))]) == []


def test_the_cli_validate_names_each_providers_store_and_warns_before_anything_is_sent(tmp_path):
    (tmp_path / "t.py").write_text("print('hi')\n")
    path = write_job(tmp_path, """
        name: j
        code: .
        command: python t.py
        image: python:3.11-slim
        max_restarts: 2
        storage:
          checkpoint: {local: ./ckpt, docker: ./ckpt}
        """)
    proc = run_cli("validate", "-p", "local,docker", path, cwd=tmp_path, check=0)
    assert proc.stdout.count(": ok (") == 2 and "warning" not in proc.stderr  # the same directory: shared
    path.write_text(path.read_text().replace("docker: ./ckpt", "docker: ./elsewhere"))
    proc = run_cli("validate", "-p", "local,docker", path, cwd=tmp_path, check=0)
    assert proc.stdout.count(": ok (") == 2
    assert ("cloudtrain: warning: a checkpoint cannot travel from local to docker: local's checkpoint is a path on a "
            "machine (./ckpt): it stays on the machine that ran the job") in proc.stderr
