"""modelarts (Standard): the rendered CreateTrainingJob body is what the SDK's request model takes.

Every body is built into ``huaweicloudsdkmodelarts.v1.Job`` strictly (an unknown field or a
wrong type fails) and serialized back by the SDK to the same JSON.
"""
import itertools
import json
import os
import subprocess
import sys
import warnings

import huaweicloudsdkmodelarts.v1 as v1
import pytest

from cloudtrain.errors import CloudtrainWarning, JobFileError
from cloudtrain.loading import job_from_dict, load_job
from cloudtrain.plugins import get_provider
from cloudtrain_modelarts import sdk
from cloudtrain_modelarts.standard import KIND
from conftest import EXAMPLES, run_cli, write_job

SECRET = "s3cr3t-modelarts-render-5521"


def render(options=None, **extra):
    data = {"name": "digits", "command": "python train.py --epochs 5", "image": "swr.cn-north-4.myhuaweicloud.com/o/pt:2",
            "code": str(EXAMPLES / "digits-ddp"), "distribution": {"type": "ddp", "nodes": 2},
            "env": {"OMP_NUM_THREADS": "1"}}
    data.update(extra)
    if options is not None:
        data["providers"] = {"modelarts": options}
    rendered = get_provider("modelarts").render(job_from_dict(data))
    assert [a.kind for a in rendered.artifacts] == [KIND]
    return rendered, rendered.artifacts[0].content


def build(body):
    """The SDK's request model from the body, and the body the SDK would send for it."""
    request = v1.CreateTrainingJobRequest(body=sdk.to_model(v1, "Job", body))
    return request, sdk.from_model(request.body)


SHAPES = {
    "plain": {},
    "gpus": {"resources": {"gpus_per_node": 8}, "distribution": {"type": "ddp", "nodes": 4}},
    "restarts": {"max_restarts": 3},
    "mpi": {"distribution": {"type": "mpi", "nodes": 2, "procs_per_node": 4}},
    "secrets": {"secrets": {"HF_TOKEN": {"from_env": "CT_MA_SECRET"}}},
    "single": {"distribution": {"type": "none", "nodes": 1}},
}
OPTIONS = {
    "none": None,
    "pool": {"region": "cn-southwest-2", "code_dir": "obs://bkt/jobs/digits", "pool_id": "pool-a1"},
    "full": {"region": "cn-north-4", "project_id": "p", "workspace_id": "ws-1", "code_dir": "/bkt/code/digits/",
             "image": "swr.cn-north-4.myhuaweicloud.com/o/other:1", "flavor_id": "modelarts.vm.gpu.8v100",
             "pool_id": "pool-b", "priority": 3, "log_export_path": "obs://bkt/logs",
             "inputs": [{"name": "data", "obs_url": "obs://bkt/data/", "local_dir": "/home/ma-user/data"}],
             "outputs": [{"name": "out", "obs_url": "obs://bkt/out/", "access_method": "env"}],
             "description": "nightly", "master_port": 23456, "python": "python3.9"},
}


@pytest.mark.parametrize("shape,opts", list(itertools.product(SHAPES, OPTIONS)))
def test_every_body_builds_the_sdk_request_model(shape, opts, monkeypatch):
    monkeypatch.setenv("CT_MA_SECRET", SECRET)
    rendered, body = render(OPTIONS[opts], **SHAPES[shape])
    request, sent = build(body)
    assert sent == body                       # nothing dropped or reshaped by the SDK's model
    assert isinstance(request.body.algorithm.engine, v1.JobEngine)
    assert SECRET not in rendered.to_json()


def test_strict_model_building_rejects_what_the_sdk_would_drop():
    _, body = render()
    body["algorithm"]["entrypoint"] = "x"
    with pytest.raises(ValueError, match=r"body.algorithm.entrypoint: not a field of JobAlgorithm"):
        build(body)
    _, body = render()
    body["spec"]["resource"]["node_count"] = "2"
    with pytest.raises(ValueError, match=r"body.spec.resource.node_count: expected int"):
        build(body)


def test_mapping_of_the_job_to_the_request():
    _, body = render(OPTIONS["full"], resources={"gpus_per_node": 8}, distribution={"type": "ddp", "nodes": 4},
                     max_restarts=2)
    meta, algo, spec = body["metadata"], body["algorithm"], body["spec"]
    assert meta == {"name": "digits", "description": "nightly", "workspace_id": "ws-1",
                    "annotations": {"fault-tolerance/job-retry-num": "2",
                                    "fault-tolerance/job-unconditional-retry": "true"}}
    assert algo["engine"] == {"image_url": "swr.cn-north-4.myhuaweicloud.com/o/other:1"}
    assert algo["code_dir"] == "/bkt/code/digits/"
    assert algo["working_dir"] == "/home/ma-user/modelarts/user-job-dir/digits"
    assert algo["command"] == ('cd /home/ma-user/modelarts/user-job-dir/digits && PYTHONPATH=.cloudtrain'
                               '"${PYTHONPATH:+:$PYTHONPATH}" python3.9 -m cloudtrain.launch --platform modelarts '
                               '--type ddp --nproc-per-node 8 -- python train.py --epochs 5')
    assert algo["environments"]["CLOUDTRAIN_DETECTORS"] == "modelarts=cloudtrain_modelarts.detect:detect_standard"
    assert algo["environments"]["CLOUDTRAIN_MASTER_PORT"] == "23456"
    assert algo["environments"]["OMP_NUM_THREADS"] == "1"
    assert algo["inputs"] == [{"name": "data", "access_method": "parameter", "local_dir": "/home/ma-user/data",
                               "remote": {"obs": {"obs_url": "/bkt/data/"}}}]
    assert algo["outputs"][0]["access_method"] == "env"
    assert spec == {"resource": {"node_count": 4, "flavor_id": "modelarts.vm.gpu.8v100", "pool_id": "pool-b"},
                    "log_export_path": {"obs_url": "/bkt/logs/"}, "schedule_policy": {"priority": 3}}


def test_flavor_from_the_pool_cards_or_the_instance_type():
    _, body = render({"pool_id": "p"}, resources={"gpus_per_node": 4})
    assert body["spec"]["resource"]["flavor_id"] == "modelarts.pool.visual.4xlarge"
    _, body = render({"pool_id": "p"})  # a CPU pool: no flavor
    assert "flavor_id" not in body["spec"]["resource"]
    _, body = render(resources={"instance_type": "modelarts.vm.cpu.8u"})
    assert body["spec"]["resource"]["flavor_id"] == "modelarts.vm.cpu.8u"


def test_no_restart_annotations_without_max_restarts():
    _, body = render()
    assert "annotations" not in body["metadata"]


def test_secrets_render_masked():
    _, body = render(secrets={"HF_TOKEN": {"from_env": "NOT_SET_ANYWHERE"}})
    assert body["algorithm"]["environments"]["HF_TOKEN"] == "***"


def test_a_job_without_image_is_refused_at_its_line(tmp_path):
    path = write_job(tmp_path, """
        name: noimg
        command: python t.py
        """)
    with pytest.raises(JobFileError, match=r"job.yaml:1: image: ModelArts Standard runs a custom image"):
        get_provider("modelarts").render(load_job(path))


def test_too_many_variables_are_refused():
    with pytest.raises(JobFileError, match="at most 100 environment variables"):
        render(env={f"V{i}": "x" for i in range(97)})


def test_ma_variables_draw_a_warning():
    with pytest.warns(CloudtrainWarning, match="MA_DEBUG: ModelArts reserves MA_"):
        render(env={"MA_DEBUG": "1"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render()


def test_mpi_across_nodes_starts_sshd_on_every_node_and_waits_for_it():
    """Issue 21 #3.  ModelArts Standard runs the same command on every node and provides no MPI
    launcher or hostfile (platforms.md 3.3: MA_*/VC_* variables only), so node 0's ``mpirun -H``
    reaches the other nodes by ssh, which Huawei's custom-image MPI guidance says the image must
    allow or "training fails".  As on SageMaker (``--sshd``): every node starts the image's sshd,
    mpirun's ssh skips host-key checks, node 0 waits for the others' sshd; the key pair stays
    the image's (warned)."""
    for kind in ("mpi", "horovod"):
        with pytest.warns(CloudtrainWarning, match="must hold a key pair shared by its nodes"):
            _, body = render(distribution={"type": kind, "nodes": 2})
        algo = body["algorithm"]
        assert f"python3 -m cloudtrain.launch --platform modelarts --sshd --type {kind} " in algo["command"]
        env = algo["environments"]
        assert env["CLOUDTRAIN_WAIT_SSH"] == "22"
        assert env["OMPI_MCA_plm_rsh_args"] == "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one node, or ddp: no ssh at all
        for extra in ({"distribution": {"type": "mpi", "nodes": 1}}, {}):
            _, body = render(**extra)
            assert "--sshd" not in body["algorithm"]["command"]
            assert "CLOUDTRAIN_WAIT_SSH" not in body["algorithm"]["environments"]


def test_options_are_checked_at_their_line(tmp_path):
    path = write_job(tmp_path, """
        name: o
        command: python t.py
        image: x
        providers:
          modelarts:
            code_dir: s3://bucket/code
        """)
    with pytest.raises(JobFileError, match=r"job.yaml:6: providers.modelarts.code_dir: .*not an OBS path"):
        get_provider("modelarts").render(load_job(path))


def test_render_from_the_cli_prints_the_envelope(tmp_path):
    path = write_job(tmp_path, f"""
        name: cli
        code: {EXAMPLES / 'digits-ddp'}
        command: python train.py
        image: swr.example/pt:1
        providers: {{modelarts: {{code_dir: obs://b/c/digits-ddp/}}}}
        """)
    envelope = json.loads(run_cli("render", "-p", "modelarts", path, "-o", "json", check=0).stdout)
    assert envelope["artifacts"][0]["kind"] == "modelarts/CreateTrainingJob"
    build(envelope["artifacts"][0]["content"])


def test_stage_writes_code_and_launcher_that_runs_with_modelarts_env(tmp_path):
    path = write_job(tmp_path, f"""
        name: stg
        code: {EXAMPLES / 'digits-ddp'}
        command: python train.py --epochs 1
        image: x
        distribution: {{type: ddp, nodes: 3, procs_per_node: 2}}
        """)
    dest = tmp_path / "digits-ddp"
    proc = subprocess.run([sys.executable, "-m", "cloudtrain_modelarts.stage", str(path), str(dest)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (dest / "train.py").is_file() and (dest / ".cloudtrain" / "cloudtrain_modelarts" / "detect.py").is_file()
    # The rendered node command, run in the staged directory with ModelArts' variables and no
    # cloudtrain installed (python -S: no site-packages), resolves this node's place.
    _, body = render({"code_dir": "obs://b/x/digits-ddp/"}, distribution={"type": "ddp", "nodes": 3, "procs_per_node": 2})
    env = {"PATH": os.environ["PATH"], **body["algorithm"]["environments"],
           **get_provider("modelarts").environment(job_from_dict({"name": "stg", "command": "x",
                                                                   "distribution": {"nodes": 3}}), 1)}
    command = body["algorithm"]["command"].split(" && ", 1)[1].replace("python3 -m", f"{sys.executable} -S -m")
    command = command.replace("cloudtrain.launch", "cloudtrain.launch --print", 1)
    out = subprocess.run(["/bin/sh", "-c", command], cwd=dest, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--node-rank 1 --master-addr stg-0 --master-port 29500" in out.stdout
    assert run_cli_stage_refuses_non_empty(path, dest).returncode == 2


def run_cli_stage_refuses_non_empty(path, dest):
    return subprocess.run([sys.executable, "-m", "cloudtrain_modelarts.stage", str(path), str(dest)],
                          capture_output=True, text=True, timeout=60)
