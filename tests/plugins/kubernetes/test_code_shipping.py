"""code: travels in the request on every Kubernetes provider (kubeflow, kubeflow-trainer,
volcano, eks, modelarts-lite): a ConfigMap ``<name>-code`` whose ``binaryData`` holds the
reproducible gzip'd tar, mounted read-only, unpacked by the node shell before the command.

Pinned facts:
- "The data stored in a ConfigMap cannot exceed 1 MiB" (kubernetes.io/docs/concepts/configuration/
  configmap/); the API server checks ``data`` + ``binaryData`` together against
  ``core.MaxSecretSize = 1 * 1024 * 1024`` (kubernetes pkg/apis/core/validation/validation.go,
  ``ValidateConfigMap``).
- ``binaryData``: "BinaryData contains the binary data. Each key must consist of alphanumeric
  characters, '-', '_' or '.'. BinaryData can contain byte sequences that are not in the UTF-8
  range." -- its JSON form is base64 (the Python client's ``V1ConfigMap.binary_data: dict(str, str)``).
"""
import base64
import gzip
import io
import json
import os
import tarfile

import pytest
import yaml

from cloudtrain.launch.unpack import UnsafeArchive, unpack
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_kubernetes import manifests as m
from conftest import run_cli, write_job
from crd_schemas import validate
from doubles.kube_double import FakeKube

PROVIDERS = {"kubeflow": {}, "kubeflow-trainer": {}, "volcano": {},
             "eks": {"cluster": "c", "region": "us-east-1"},
             "modelarts-lite": {"cluster_id": "x", "region": "cn-north-4"}}


def code_dir(tmp_path, **files):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    for name, data in (files or {"train.py": "print('hi')\n"}).items():
        (code / name).parent.mkdir(parents=True, exist_ok=True)
        (code / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return code


def job_yaml(tmp_path, provider, code="code", **options):
    options = json.dumps({**PROVIDERS[provider], **options})
    return write_job(tmp_path, f"""
        name: ship
        code: {code}
        command: python train.py
        image: registry.example/train:1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        providers: {{{provider}: {options}}}
        """)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_kubernetes_provider_ships_the_code_in_a_configmap(tmp_path, provider):
    code_dir(tmp_path)
    job = load_job(job_yaml(tmp_path, provider))
    objects = [a.content for a in get_provider(provider).render(job).artifacts]
    cm = next(o for o in objects if o["metadata"]["name"].endswith("-code"))
    validate(cm)
    (value,) = cm["binaryData"].values()
    assert "sent at submit" in value and "sha256:" in value       # size and digest, not the bytes
    workload = objects[-1]
    text = json.dumps(workload)
    assert m.CODE_DIR in text and "-m cloudtrain.launch.unpack" in text and cm["metadata"]["name"] in text


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_code_null_ships_nothing(tmp_path, provider):
    job = load_job(job_yaml(tmp_path, provider, code="null"))
    objects = [a.content for a in get_provider(provider).render(job).artifacts]
    assert not any(o["metadata"]["name"].endswith("-code") for o in objects)
    workload = json.dumps(objects[-1])
    assert "-m cloudtrain.launch.unpack" not in workload and m.CODE_DIR not in workload


def test_the_render_holds_size_and_digest_not_the_bytes(tmp_path):
    big = os.urandom(300 * 1024)  # incompressible
    code_dir(tmp_path, **{"train.py": "print(1)\n", "weights.bin": big})
    proc = run_cli("render", "-p", "kubeflow", job_yaml(tmp_path, "kubeflow"), "-o", "yaml", check=0)
    # the launcher ConfigMap is ~100 KiB; the code (400 KiB as base64) is not there
    assert len(proc.stdout) < 200 * 1024
    cm = next(d for d in yaml.safe_load_all(proc.stdout) if d and d["metadata"]["name"] == "ship-code")
    size = int(cm["binaryData"]["code.tar.gz"].split()[1])
    assert 300 * 1024 < size < m.INLINE_CODE_LIMIT


def test_code_too_large_for_a_configmap_is_exit_2_naming_size_limit_and_fix(tmp_path):
    code_dir(tmp_path, **{"train.py": "print(1)\n", "weights.bin": os.urandom(1000 * 1024)})
    path = job_yaml(tmp_path, "kubeflow")
    for command in ("render", "validate"):
        proc = run_cli(command, "-p", "kubeflow", path, check=2)
        assert "code" in proc.stderr and "KiB packed" in proc.stderr and "900 KiB" in proc.stderr
        assert "1 MiB" in proc.stderr and "code: null" in proc.stderr and ".cloudtrainignore" in proc.stderr
        assert "set providers.kubeflow.code_store to an object store" in proc.stderr  # the way that keeps all files
        assert f"{path}:2" in proc.stderr  # the code field's line


def test_submit_sends_the_archive_bytes_and_they_unpack_to_the_code(tmp_path, home):
    code_dir(tmp_path, **{"train.py": "print('trained')\n", "pkg/util.py": "X = 1\n"})
    with FakeKube() as kube:
        cfg = kube.kubeconfig(tmp_path / "kubeconfig")
        job = load_job(job_yaml(tmp_path, "kubeflow", kubeconfig=str(cfg)))
        get_provider("kubeflow").submit(job)
        stored = kube.find("configmaps", "default", "ship-code")
    archive = tmp_path / "code.tar.gz"
    archive.write_bytes(base64.b64decode(stored["binaryData"]["code.tar.gz"]))
    out = tmp_path / "pod"
    assert unpack(str(archive), str(out)) == 2
    assert (out / "train.py").read_text() == "print('trained')\n" and (out / "pkg" / "util.py").read_text() == "X = 1\n"
    assert not (out / ".cloudtrain").exists()  # the launcher comes from its own ConfigMap


def test_submit_refuses_code_changed_since_render(tmp_path, home):
    code = code_dir(tmp_path)
    with FakeKube() as kube:
        cfg = kube.kubeconfig(tmp_path / "kubeconfig")
        job = load_job(job_yaml(tmp_path, "kubeflow", kubeconfig=str(cfg)))
        provider = get_provider("kubeflow")
        rendered = provider.render(job)
        (code / "train.py").write_text("print('changed')\n")
        with pytest.raises(Exception, match="changed after the job was rendered"):
            provider.submit(rendered)
        assert kube.find("pytorchjobs", "default", "ship") is None


@pytest.mark.parametrize("name", ["../evil", "/etc/evil", "a/../../evil"])
def test_unpack_refuses_paths_outside_the_working_directory(tmp_path, name):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(gzip.compress(raw.getvalue()))
    with pytest.raises(UnsafeArchive):
        unpack(str(archive), str(tmp_path / "dest"))
    assert not (tmp_path / "evil").exists()


def test_the_same_code_renders_the_same_configmap(tmp_path):
    code_dir(tmp_path)
    job = load_job(job_yaml(tmp_path, "volcano"))
    first = get_provider("volcano").render(job).artifacts
    os.utime(tmp_path / "code" / "train.py", (1, 1))  # mtimes are not in the archive
    again = get_provider("volcano").render(load_job(job_yaml(tmp_path, "volcano"))).artifacts
    assert [a.content for a in first] == [a.content for a in again]
