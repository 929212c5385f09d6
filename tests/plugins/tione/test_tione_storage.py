"""storage.inputs / storage.output on TI-ONE: inputs become DataConfigs (USER_DATA) mounted at
/opt/ml/input/data/<name>, a cos:// output becomes the task's Output (TI-ONE uploads output_dir
there) and a file-system output an OUTPUT DataConfig; `cloudtrain outputs` downloads the COS
output through the real COS SDK (against cos_double.py).

Pinned facts (tencentcloud-sdk-python-tione, tione.v20211111.models):
- ``DataConfig``: ``MappingPath``, ``DataSourceUsage`` (``USER_DATA``, ``OUTPUT``, ...),
  ``DataSourceType`` (``DATASET、COS、CFS、CFSTurbo、GooseFSx、HDFS、WEDATA_HDFS``), ``COSSource``
  (``CosPathInfo``), ``CFSSource`` (``CFSConfig{Id, Path}``), ``ReadOnly``;
- ``CreateTrainingTaskRequest.Output``: "COS训练输出路径" (the COS training output path), a ``CosPathInfo``.
"""
import json
import re
import warnings

import pytest
from tencentcloud.common.credential import Credential
from tencentcloud.tione.v20211111 import models

from cloudtrain.spec.errors import BadInput
from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider
from conftest import run_cli, write_job
from doubles.tione_fixtures import cos, fake  # noqa: F401
from doubles.tione_double import SECRET_ID, SECRET_KEY

from cloudtrain_tione.provider import TioneProvider

OPTIONS = {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST", "code_source": "image"}
RUNS = "runs-1250000000"




def job(storage, code=".", **options):
    return job_from_dict({"name": "st", "command": "python t.py", "image": "img:1", "code": str(code),
                          "storage": storage, "providers": {"tione": {**OPTIONS, **options}}})


def request_of(j):
    request = get_provider("tione").render(j).artifacts[-1].content
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "<Key> fileds are useless": a field the SDK model lacks
        models.CreateTrainingTaskRequest()._deserialize(json.loads(json.dumps(request)))
    return request


def test_the_sdk_model_takes_cos_and_cfs_data_configs():
    doc = models.DataConfig.__init__.__doc__
    assert "DATASET、COS、CFS、CFSTurbo、GooseFSx、HDFS、WEDATA_HDFS" in doc
    assert ":type CFSSource: :class:`tencentcloud.tione.v20211111.models.CFSConfig`" in doc
    assert ":type COSSource: :class:`tencentcloud.tione.v20211111.models.CosPathInfo`" in doc
    assert re.search(r"USER_DATA, USER_CODE, USER_MODEL, OUTPUT", doc)
    assert re.search(r":param _Output: <p>COS训练输出路径</p>", models.CreateTrainingTaskRequest.__init__.__doc__)


def test_inputs_are_mounted_and_a_cos_output_is_the_tasks_output():
    request = request_of(job({"inputs": {"train": "cos://data-1250000000/digits/train", "vocab": "cfs://cfs-9/vocab"},
                              "output": f"cos://{RUNS}/digits/"}))
    assert request["DataConfigs"] == [
        {"MappingPath": "/opt/ml/input/data/train", "DataSourceUsage": "USER_DATA", "DataSourceType": "COS",
         "COSSource": {"Bucket": "data-1250000000", "Region": "ap-shanghai", "Paths": ["digits/train"]},
         "ReadOnly": True},
        {"MappingPath": "/opt/ml/input/data/vocab", "DataSourceUsage": "USER_DATA", "DataSourceType": "CFS",
         "CFSSource": {"Id": "cfs-9", "Path": "/vocab"}, "ReadOnly": True}]
    assert request["DataSource"] == "COS"
    assert request["Output"] == {"Bucket": RUNS, "Region": "ap-shanghai", "Paths": ["digits/"]}
    env = {e["Name"]: e["Value"] for e in request["Envs"]}
    assert env["CLOUDTRAIN_INPUT_TRAIN"] == "/opt/ml/input/data/train"
    assert env["CLOUDTRAIN_INPUT_VOCAB"] == "/opt/ml/input/data/vocab"
    assert env["CLOUDTRAIN_OUTPUT_DIR"] == "/opt/ml/model"


def test_a_file_system_output_is_mounted_at_the_output_dir():
    request = request_of(job({"output": "goosefsx://gfsx-1/runs/st"}, output_dir="/opt/ml/out"))
    assert request["DataConfigs"] == [
        {"MappingPath": "/opt/ml/out", "DataSourceUsage": "OUTPUT", "DataSourceType": "GooseFSx",
         "GooseFSSource": {"Id": "gfsx-1", "Type": "GooseFSx", "Path": "/runs/st"}, "ReadOnly": False}]
    assert "Output" not in request


def test_the_same_output_said_twice_differently_is_refused_at_storage_output():
    with pytest.raises(BadInput, match=r"storage.output: is cos://runs-1250000000/a but providers.tione.output is "
                                       r"cos://runs-1250000000/b; keep one of them"):
        get_provider("tione").render(job({"output": f"cos://{RUNS}/a"}, output=f"cos://{RUNS}/b"))
    same = request_of(job({"output": f"cos://{RUNS}/a/"}, output=f"cos://{RUNS}/a"))
    assert same["Output"]["Paths"] == ["a/"]


def test_a_scheme_tione_cannot_take_is_exit_2_naming_what_it_takes(tmp_path):
    path = write_job(tmp_path, """
        name: st
        command: python t.py
        image: img:1
        storage:
          output: s3://team/out
        providers: {tione: {region: ap-shanghai, code_source: image}}
        """)
    proc = run_cli("validate", "-p", "tione", path, check=2)
    assert f"{path}:5: storage.output: tione cannot take 's3://team/out' (scheme s3); it takes cos://, cfs://, " \
           "cfsturbo://, goosefsx://" in proc.stderr


def test_outputs_downloads_what_the_tasks_cos_output_holds(fake, cos, tmp_path):
    p = TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=fake.url, cos_endpoint=cos.url, poll=0)
    run = p.submit(p.render(job({"output": f"cos://{RUNS}/digits/st/"}, code=tmp_path)))
    # what TI-ONE uploads from output_dir when the task ends, next to another job's output
    cos.objects.update({(RUNS, "digits/st/model.pt"): b"weights", (RUNS, "digits/st/metrics/final.json"): b"{}",
                        (RUNS, "digits/other/model.pt"): b"not this one"})
    written = p.outputs(run.id, tmp_path / "out")
    assert sorted(f.relative_to(tmp_path / "out").as_posix() for f in written) == ["metrics/final.json", "model.pt"]
    assert (tmp_path / "out" / "model.pt").read_bytes() == b"weights"
    assert "DescribeTrainingTask" in fake.actions()


def test_outputs_on_a_file_system_say_where_they_are(fake, cos, tmp_path):
    p = TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=fake.url, cos_endpoint=cos.url, poll=0)
    run = p.submit(p.render(job({"output": "cfs://cfs-1/runs/st"}, code=tmp_path)))
    with pytest.raises(BadInput, match=r"keeps its output on CFS \(mounted at /opt/ml/model\), not on COS"):
        p.outputs(run.id, tmp_path / "out")
    assert cos.calls == []


def test_cli_outputs(fake, cos, tmp_path, home):
    path = write_job(tmp_path, f"""
        name: st
        command: python t.py
        image: img:1
        storage: {{output: "cos://{RUNS}/cli/"}}
        providers: {{tione: {{region: ap-shanghai, instance_type: TI.S.LARGE.POST, code_source: image}}}}
        """)
    (tmp_path / "t.py").write_text("print(1)\n")
    env = {"CLOUDTRAIN_TIONE_ENDPOINT": fake.url, "CLOUDTRAIN_COS_ENDPOINT": cos.url,
           "TENCENTCLOUD_SECRET_ID": SECRET_ID, "TENCENTCLOUD_SECRET_KEY": SECRET_KEY,
           "TENCENTCLOUD_REGION": "ap-shanghai"}
    handle = run_cli("submit", "-p", "tione", path, "--detach", env=env, check=0).stdout.strip()
    cos.objects[(RUNS, "cli/model.pt")] = b"w"
    proc = run_cli("outputs", handle, "-o", tmp_path / "fetched", env=env, check=0)
    assert (tmp_path / "fetched" / "model.pt").read_bytes() == b"w" and "downloaded 1 file to" in proc.stdout
