"""providers.tione.code_store: the code archive (code + launcher bundle) uploaded to COS at submit
through the real COS SDK (against cos_double.py), named by the request's CodePackagePath, and run
by the rendered start command on a node that has only the package, TI-ONE's variables and a Python.

Pinned facts (tencentcloud-sdk-python-tione, tione.v20211111.models):
- ``CreateTrainingTaskRequest.CodePackagePath`` is a ``CosPathInfo``, "COS代码包路径" (the COS code
  package path); ``CosPathInfo`` is ``{Bucket, Region, Paths}`` and Paths "目前只支持单个" (one path);
- ``TrainingTaskDetail`` echoes ``CodePackagePath`` and ``Output`` (both ``CosPathInfo``);
- COS addresses a bucket as ``BUCKETNAME-APPID.cos.REGION.myqcloud.com`` (qcloud_cos
  ``CosConfig.get_host``), which the double accepts and nothing else.
"""
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile

import pytest
from tencentcloud.common.credential import Credential
from tencentcloud.tione.v20211111 import models

from cloudtrain.transfer import objectstore
from cloudtrain.spec.errors import BadInput, JobFileError, PlatformError
from cloudtrain.input.loading import job_from_dict, load_job
from cloudtrain.extend.plugins import get_provider
from conftest import cli_env as base_env, run_cli, write_job
from doubles.tione_fixtures import cos, fake  # noqa: F401
from doubles.tione_double import SECRET_ID, SECRET_KEY

from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.providers.request import CodeUpload, Placeholder, fill
from cloudtrain_tione.provider import TioneProvider
from cloudtrain_tione.render import TioneRequest, decode_start_commands

BUCKET = "train-1250000000"
STORE = f"cos://{BUCKET}/team/cloudtrain"
OPTIONS = {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST", "code_store": STORE}
# a Python without cloudtrain installed, when the machine has one
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable




def provider(fake, cos):
    return TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=fake.url, cos_endpoint=cos.url, poll=0)


def make_job(tmp_path, command="python train.py", **options):
    code = tmp_path / "code"
    if not code.exists():
        code.mkdir()
        (code / "train.py").write_text("print('hi')\n")
    return job_from_dict({"name": "cs", "code": str(code), "command": command, "image": "img:1",
                          "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 2},
                          "providers": {"tione": {**OPTIONS, **options}}})


def job_file(tmp_path, tione: str):
    """job.yaml (its providers.tione on line 5, as the flow mapping ``tione``) next to train.py."""
    (tmp_path / "train.py").write_text("print(1)\n")
    return write_job(tmp_path, f"""
        name: cs
        command: python train.py
        image: img:1
        providers:
          tione: {tione}
        """)


def test_the_render_shows_the_upload_before_the_task_that_names_it(tmp_path):
    rendered = get_provider("tione").render(make_job(tmp_path))
    assert [a.kind for a in rendered.artifacts] == ["cos/PutObject", "tione/CreateTrainingTask"]
    upload, request = (a.content for a in rendered.artifacts)
    assert upload == {"Bucket": BUCKET, "Key": "team/cloudtrain/cloudtrain-code/<code-digest>.tar.gz",
                      "Region": "ap-shanghai", "ContentType": "application/gzip"}
    assert request["CodePackagePath"] == {"Bucket": BUCKET, "Region": "ap-shanghai", "Paths": [upload["Key"]]}
    assert "DataConfigs" not in request  # no code mount: the package is the code
    model = models.CreateTrainingTaskRequest()
    model._deserialize(json.loads(json.dumps(request)))
    assert isinstance(model.CodePackagePath, models.CosPathInfo) and model.CodePackagePath.Paths == [upload["Key"]]


def test_the_render_is_a_typed_request_that_cores_one_fill_completes(tmp_path):
    """The request a submit reads is typed (no artifact searched by kind); core's ``fill`` puts
    the archive's digest in the upload and, shell-quoted, in the start commands that go base64'd."""
    request = get_provider("tione").render(make_job(tmp_path, command='python train.py --note "a b"')).request
    assert isinstance(request, TioneRequest)
    key = f"team/cloudtrain/cloudtrain-code/{Placeholder.CODE_DIGEST}.tar.gz"
    assert request.code_upload == CodeUpload(f"cos://{BUCKET}/{key}", region="ap-shanghai")
    assert request.name == f"cs-{Placeholder.SPEC_HASH}" and request.project is None
    digest, spec = "ab" * 32, "0123456789abcdef"
    filled = fill(request, {Placeholder.CODE_DIGEST: digest, Placeholder.SPEC_HASH: spec})
    body = filled.task()
    assert "EncodedStartCmdInfo" in body  # the command holds quotes: TI-ONE gets it base64'd
    assert f" --sha256 '{digest}' " in decode_start_commands(body)["StartCmd"]
    assert body["CodePackagePath"]["Paths"] == [key.replace(Placeholder.CODE_DIGEST, digest)]
    assert body["Name"] == f"cs-{spec}" and {"TagKey": "cloudtrain-spec", "TagValue": spec} in body["Tags"]
    sent = json.dumps(body) + json.dumps(decode_start_commands(body))
    assert Placeholder.CODE_DIGEST not in sent and Placeholder.SPEC_HASH not in sent
    # the render still shows the placeholders: filling made a copy
    assert Placeholder.CODE_DIGEST in json.dumps(decode_start_commands(request.task()))


def test_the_submit_pipeline_is_cores_alone():
    """tione implements platform calls; no step of CloudProvider's template is its own."""
    for step in ("submit", "schedule", "ship", "ship_code", "placeholder_values", "spec_hash", "status", "cancel",
                 "logs"):
        assert step not in vars(TioneProvider), step
    assert TioneProvider.code_store is not CloudProvider.code_store  # COS with the provider's own credentials


def test_the_sdk_models_say_what_the_request_relies_on():
    doc = models.CreateTrainingTaskRequest.__init__.__doc__
    assert re.search(r":param _CodePackagePath: <p>COS代码包路径</p>\s+:type CodePackagePath: "
                     r":class:`tencentcloud.tione.v20211111.models.CosPathInfo`", doc)
    assert re.search(r":param _Paths: 路径列表，目前只支持单个", models.CosPathInfo.__init__.__doc__)
    detail = models.TrainingTaskDetail.__init__.__doc__
    assert ":type CodePackagePath: :class:`tencentcloud.tione.v20211111.models.CosPathInfo`" in detail
    assert ":type Output: :class:`tencentcloud.tione.v20211111.models.CosPathInfo`" in detail
    from qcloud_cos import CosConfig
    host = CosConfig(Region="ap-shanghai", SecretId="a", SecretKey="b").get_host(BUCKET)
    assert host == f"{BUCKET}.cos.ap-shanghai.myqcloud.com"


def test_code_source_wins_and_has_nothing_to_ship(tmp_path):
    job = make_job(tmp_path, code_source="cfs://cfs-1/code")
    rendered = get_provider("tione").render(job)
    assert [a.kind for a in rendered.artifacts] == ["tione/CreateTrainingTask"]
    assert "CodePackagePath" not in rendered.artifacts[0].content
    with pytest.raises(BadInput, match="drop code_source and set providers.tione.code_store"):
        TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY)).ship_code(rendered)


@pytest.mark.parametrize("store, field, message", [
    ("s3://bucket/x", "providers.tione.code_store", "is not a COS URL; give cos://BUCKETNAME-APPID/PREFIX"),
    ("cos://train/x", "providers.tione.code_store", "is not a COS URL"),  # no APPID
    ("cos:/train-1250000000", "providers.tione.code_store", "is not a SCHEME://BUCKET/PREFIX URL"),
])
def test_a_bad_code_store_is_exit_2_at_its_line(tmp_path, store, field, message):
    path = job_file(tmp_path, f'{{region: ap-shanghai, instance_type: TI.S.LARGE.POST, code_store: "{store}"}}')
    with pytest.raises(JobFileError) as info:
        get_provider("tione").render(load_job(path))
    assert str(info.value).startswith(f"{path}:5: {field}: ") and message in str(info.value)
    proc = run_cli("validate", "-p", "tione", path, check=2)
    assert f"{path}:5: {field}: " in proc.stderr


def test_neither_code_store_nor_code_source_is_exit_2_naming_code_store(tmp_path):
    path = job_file(tmp_path, "{region: ap-shanghai, instance_type: TI.S.LARGE.POST}")
    proc = run_cli("validate", "-p", "tione", path, check=2)
    assert f"{path}:5: providers.tione.code_store: is not set" in proc.stderr
    assert "cloudtrain config set -p tione code_store=cos://" in proc.stderr
    proc = run_cli("submit", "-p", "tione", path, env={"TENCENTCLOUD_SECRET_ID": SECRET_ID,
                                                      "TENCENTCLOUD_SECRET_KEY": SECRET_KEY}, check=2)
    assert "providers.tione.code_store: is not set" in proc.stderr


def test_render_with_a_code_store_imports_no_sdk(tmp_path):
    path = job_file(tmp_path, f'{{region: ap-shanghai, instance_type: TI.S.LARGE.POST, code_store: "{STORE}"}}')
    code = ("import sys; from cloudtrain.commands.cli import main; rc = main(sys.argv[1:]); "
            "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & {'tencentcloud', 'qcloud_cos'}))")
    proc = subprocess.run([sys.executable, "-c", code, "render", "-p", "tione", str(path)], capture_output=True,
                          text=True, env=base_env())
    assert "# cos/PutObject: code" in proc.stdout and "LOADED []" in proc.stdout, proc.stderr


def test_submit_uploads_the_archive_once_and_the_task_names_it(fake, cos, tmp_path):
    job = make_job(tmp_path)
    run = provider(fake, cos).submit(get_provider("tione").render(job))
    (key,) = cos.puts()
    data = cos.objects[(BUCKET, key)]
    assert key == f"team/cloudtrain/cloudtrain-code/{hashlib.sha256(data).hexdigest()}.tar.gz"
    body = fake.bodies("CreateTrainingTask")[0]
    assert body["CodePackagePath"] == {"Bucket": BUCKET, "Region": "ap-shanghai", "Paths": [key]}
    assert "<code-digest>" not in json.dumps(body)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
    assert "train.py" in names and ".cloudtrain/cloudtrain/launch/main.py" in names
    assert ".cloudtrain/cloudtrain_tione/detect.py" in names
    assert provider(fake, cos).status(run.id).name == body["Name"]

    # the same code again, in this process: nothing is asked or sent to COS; the task is the same
    calls = len(cos.calls)
    assert provider(fake, cos).submit(get_provider("tione").render(make_job(tmp_path))).id == run.id
    assert len(cos.calls) == calls
    # ... and from another process (nothing remembered): one look, no upload
    objectstore.forget_uploads()
    assert provider(fake, cos).submit(get_provider("tione").render(make_job(tmp_path))).id == run.id
    assert cos.puts() == [key] and cos.calls[-1] == ("HEAD", BUCKET, key)
    assert fake.actions().count("CreateTrainingTask") == 1
    # changed code: a new archive and a new task
    (tmp_path / "code" / "train.py").write_text("print('changed')\n")
    other = provider(fake, cos).submit(get_provider("tione").render(make_job(tmp_path)))
    assert other.id != run.id and len(cos.puts()) == 2 and cos.puts()[1] != key
    assert fake.bodies("CreateTrainingTask")[1]["CodePackagePath"]["Paths"] == [cos.puts()[1]]


def test_a_failed_upload_creates_no_task(fake, cos, tmp_path):
    job = make_job(tmp_path, code_store="cos://gone-1250000000/cloudtrain")
    with pytest.raises(PlatformError, match=r"upload cos://gone-1250000000/cloudtrain/cloudtrain-code/[0-9a-f]{64}"
                                            r"\.tar\.gz: COS refused: NoSuchBucket"):
        provider(fake, cos).submit(get_provider("tione").render(job))
    assert "CreateTrainingTask" not in fake.actions()


def test_ship_code_alone_uploads_what_submit_would(fake, cos, tmp_path):
    rendered = get_provider("tione").render(make_job(tmp_path))
    (url,) = provider(fake, cos).ship_code(rendered)
    assert url == f"cos://{BUCKET}/{cos.puts()[0]}" and fake.calls == []


@pytest.mark.parametrize("unpacked, folder", [(False, "node"), (True, "node"), (False, "node dir")],
                         ids=["package-as-is", "package-unpacked", "code-dir-with-a-space"])
def test_a_node_runs_the_start_command_from_the_package(fake, cos, tmp_path, unpacked, folder):
    """The node has what TI-ONE gives it: the code package in code_dir (as the archive, or
    unpacked), the request's Envs, TI-ONE's DDP variables and the image's Python."""
    node = tmp_path / folder / "code"
    command = 'python train.py --note "a b"'
    job = make_job(tmp_path, command=command, code_dir=str(node), python=PYTHON)
    provider(fake, cos).submit(get_provider("tione").render(job))
    body = fake.bodies("CreateTrainingTask")[0]
    (key,) = body["CodePackagePath"]["Paths"]
    package = cos.objects[(body["CodePackagePath"]["Bucket"], key)]
    node.mkdir(parents=True)
    if unpacked:
        with tarfile.open(fileobj=io.BytesIO(package)) as tar:
            # the "data" filter exists from Python 3.11.4/3.12 (Debian 12's python3 is 3.11.2)
            tar.extractall(node, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    else:
        (node / key.rsplit("/", 1)[1]).write_bytes(package)
    line = decode_start_commands(body)["StartCmd"].replace("-m cloudtrain.launch", "-m cloudtrain.launch --print")
    assert 'cd "$d" &&' in line
    assert f"--sha256 '{hashlib.sha256(package).hexdigest()}' " in line  # the archive's digest, checked first
    pybin = tmp_path / "pybin"  # the image's `python`
    pybin.mkdir()
    (pybin / "python").symlink_to(sys.executable)
    env = {"PATH": f"{pybin}:/usr/bin:/bin", "NODE_LIST": "a:1,b:1", "INDEX": "1", "MASTER_ADDR": "10.35.110.11",
           "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1", "GPU_NUM": "2", "GPU_NUM_PER_NODE": "1",
           "TMPDIR": str(tmp_path)}
    env.update({e["Name"]: e["Value"] for e in body["Envs"]})  # what TI-ONE injects from the request
    proc = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("python -m torch.distributed.run --nnodes 2 --nproc-per-node 2 --node-rank 1 "
                                   "--master-addr 10.35.110.11 --master-port 23456 --tee 3 train.py --note 'a b'")
    unpacked_dirs = [p for p in tmp_path.iterdir() if p.name.startswith("tmp.")]
    assert len(unpacked_dirs) == (0 if unpacked else 1)
    if not unpacked:
        assert (unpacked_dirs[0] / "train.py").is_file()


def test_a_package_changed_in_cos_runs_nothing(fake, cos, tmp_path):
    """An archive in code_dir whose sha256 is not the submitted one is refused before anything
    is written or run."""
    node = tmp_path / "node" / "code"
    job = make_job(tmp_path, code_dir=str(node), python=PYTHON)
    provider(fake, cos).submit(get_provider("tione").render(job))
    body = fake.bodies("CreateTrainingTask")[0]
    (key,) = body["CodePackagePath"]["Paths"]
    package = cos.objects[(body["CodePackagePath"]["Bucket"], key)]
    node.mkdir(parents=True)
    (node / key.rsplit("/", 1)[1]).write_bytes(package + b"\0" * 512)  # still a valid gzip'd tar
    line = decode_start_commands(body)["StartCmd"]
    pybin = tmp_path / "pybin"
    pybin.mkdir()
    (pybin / "python").symlink_to(sys.executable)
    proc = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, cwd="/", timeout=60,
                          env={"PATH": f"{pybin}:/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert proc.returncode != 0 and "sha256 differs" in proc.stderr
    assert [p for p in tmp_path.glob("tmp.*/*")] == []
