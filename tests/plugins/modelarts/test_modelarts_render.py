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

from cloudtrain.transfer import shipping
from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.input.loading import job_from_dict, load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_modelarts import sdk
from cloudtrain_modelarts.render import KIND, UPLOAD_KIND
from conftest import EXAMPLES, cli_env, run_cli, write_job

SECRET = "s3cr3t-modelarts-render-5521"


def render(options=None, **extra):
    data = {"name": "digits", "command": "python train.py --epochs 5",
            "image": "swr.cn-north-4.myhuaweicloud.com/o/pt:2",
            "code": str(EXAMPLES / "digits-ddp"), "distribution": {"type": "ddp", "nodes": 2},
            "env": {"OMP_NUM_THREADS": "1"}}
    data.update(extra)
    if options is not None:
        data["providers"] = {"modelarts": options}
    rendered = get_provider("modelarts").render(job_from_dict(data))
    shipped = not (options or {}).get("code_dir")  # else code staged by hand: nothing to upload
    assert [a.kind for a in rendered.artifacts] == ([UPLOAD_KIND] if shipped else []) + [KIND]
    return rendered, rendered.artifacts[-1].content


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
    options = OPTIONS[opts]
    if shape == "mpi":  # ssh between nodes needs an image that runs as root (SSH_AS_MA_USER)
        options = dict(options or {}, image_runs_as_root=True)
    rendered, body = render(options, **SHAPES[shape])
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
        render({"flavor_id": "modelarts.vm.cpu.8u"})  # a CPU job without one: warned (chosen at submit)


def test_mpi_across_nodes_starts_sshd_on_every_node_and_waits_for_it():
    """Issue 21 #3.  ModelArts Standard runs the same command on every node and provides no MPI
    launcher or hostfile (platforms.md 3.3: MA_*/VC_* variables only), so node 0's ``mpirun -H``
    reaches the other nodes by ssh, which Huawei's custom-image MPI guidance says the image must
    allow or "training fails".  As on SageMaker (``--sshd``): every node starts the image's sshd,
    mpirun's ssh skips host-key checks, node 0 waits for the others' sshd; the key pair stays
    the image's (warned)."""
    for kind in ("mpi", "horovod"):
        with pytest.warns(CloudtrainWarning, match="must hold a key pair shared by its nodes"):
            _, body = render({"image_runs_as_root": True}, distribution={"type": kind, "nodes": 2})
        algo = body["algorithm"]
        assert f"python3 -m cloudtrain.launch --platform modelarts --sshd --type {kind} " in algo["command"]
        env = algo["environments"]
        assert env["CLOUDTRAIN_WAIT_SSH"] == "22"
        assert env["OMPI_MCA_plm_rsh_args"] == "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one node, or ddp: no ssh at all
        for extra in ({"distribution": {"type": "mpi", "nodes": 1}}, {}):
            _, body = render({"flavor_id": "modelarts.vm.cpu.8u"}, **extra)  # no flavor: warned
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


def test_the_shipped_archive_runs_with_the_rendered_command_and_modelarts_env(tmp_path):
    """ModelArts downloads code_dir (here: the archive alone) into $MA_JOB_DIR/<its last part> and
    runs the command there (platforms.md 3.2: JobAlgorithm code_dir, working_dir, command).  The
    rendered command, run in such a directory with ModelArts' variables and no cloudtrain
    installed (python -S: no site-packages), unpacks the archive and resolves this node's place."""
    job = job_from_dict({"name": "stg", "code": str(EXAMPLES / "digits-ddp"), "command": "python train.py --epochs 1",
                         "image": "x", "distribution": {"type": "ddp", "nodes": 3, "procs_per_node": 2},
                         "providers": {"modelarts": {"code_store": "obs://b/team"}}})
    provider = get_provider("modelarts")
    rendered = provider.render(job)
    upload, request = (a.content for a in rendered.artifacts)
    data, sha = shipping.packed(job, (provider.detector_target(), *provider.node_modules))
    code_dir = request["algorithm"]["code_dir"].replace("<code-digest>", sha)
    assert "/" + upload["Bucket"] + "/" + upload["Key"].replace("<code-digest>", sha) == code_dir + "code.tar.gz"
    workdir = tmp_path / code_dir.rstrip("/").rsplit("/", 1)[1]   # $MA_JOB_DIR/code
    assert request["algorithm"]["working_dir"].endswith("/" + workdir.name)
    workdir.mkdir()
    (workdir / "code.tar.gz").write_bytes(data.read_bytes())
    env = {"PATH": os.environ["PATH"], **request["algorithm"]["environments"],
           **provider.environment(job_from_dict({"name": "stg", "command": "x", "distribution": {"nodes": 3}}), 1)}
    command = request["algorithm"]["command"].split(" && ", 1)[1].replace("python3 -m", f"{sys.executable} -S -m")
    command = command.replace("'<code-digest>'", sha)  # filled in at submit
    command = command.replace("cloudtrain.launch", "cloudtrain.launch --print", 1)
    out = subprocess.run(["/bin/sh", "-c", command], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--node-rank 1 --master-addr stg-0 --master-port 29500" in out.stdout
    assert (workdir / "train.py").is_file()
    assert (workdir / ".cloudtrain" / "cloudtrain_modelarts" / "detect.py").is_file()


def test_code_dir_is_a_directory_that_modelarts_downloads():
    """The SDK's JobAlgorithm: code_dir is "the training job's code directory" (训练作业的代码目录,
    e.g. "/usr/app/"), and local_code_dir "the local path in the training container the code
    directory is downloaded to" (算法的代码目录下载到训练容器内的本地路径): ModelArts downloads a
    directory, it unpacks no archive.  So the archive goes alone into a directory of its own, and
    the command unpacks it."""
    doc = v1.JobAlgorithm.__init__.__doc__
    assert "训练作业的代码目录。如：“/usr/app/”" in doc and "算法的代码目录下载到训练容器内的本地路径" in doc
    _, body = render({"code_store": "obs://b/team"})
    assert body["algorithm"]["code_dir"].endswith("/code/")
    command = body["algorithm"]["command"]
    assert command.startswith("cd /home/ma-user/modelarts/user-job-dir/code && python3 -c ")
    assert " --sha256 '<code-digest>' code.tar.gz . && " in command  # the archive is checked, then unpacked


def test_without_code_store_the_render_names_the_option_in_its_placeholders():
    rendered, body = render()
    upload = rendered.artifacts[0].content
    assert upload == {"Bucket": "<providers.modelarts.code_store>",
                      "Key": "cloudtrain-code/<code-digest>/code/code.tar.gz", "ContentType": "application/gzip"}
    assert body["algorithm"]["code_dir"] == "/<providers.modelarts.code_store>/cloudtrain-code/<code-digest>/code/"


def test_code_dir_and_code_store_together_are_refused_at_the_line(tmp_path):
    path = write_job(tmp_path, """
        name: both
        command: python t.py
        image: x
        providers:
          modelarts:
            code_store: obs://b/team
            code_dir: obs://b/team/staged/
        """)
    with pytest.raises(JobFileError, match=r"job.yaml:7: providers.modelarts.code_dir: and code_store are both set"):
        get_provider("modelarts").render(load_job(path))
    bad = write_job(tmp_path, """
        name: s3
        command: python t.py
        image: x
        providers: {modelarts: {code_store: "s3://b/team"}}
        """)
    with pytest.raises(JobFileError,
                       match=r"job.yaml:4: providers.modelarts.code_store: .*not an obs://BUCKET/PREFIX URL"):
        get_provider("modelarts").render(load_job(bad))


# -- storage.inputs / storage.output -----------------------------------------------------------------
def test_storage_maps_to_the_jobs_obs_inputs_and_outputs():
    """The SDK's JobAlgorithm.inputs/outputs (huaweicloudsdkmodelarts.v1 Input, Output: name,
    local_dir, access_method "parameter"|"env", remote.obs.obs_url; Input.local_dir's example
    "/home/ma-user/modelarts/inputs/data_url_0").  access_method env: ModelArts appends nothing
    to the command (parameter would add --<name>=<dir> to the user's script's arguments)."""
    assert v1.Input.openapi_types["remote"] == "InputDataInfo"
    assert v1.InputDataInfo.openapi_types["obs"] == "InputDataInfoObs"
    assert v1.Output.openapi_types["remote"] == "Remote" and v1.Remote.openapi_types["obs"] == "RemoteObs"
    assert "env" in v1.Input.__init__.__doc__
    assert "/home/ma-user/modelarts/inputs/data_url_0" in v1.Input.__init__.__doc__
    _, body = render(storage={"inputs": {"train": "obs://data/digits/train/", "vocab": "obs://data/vocab.txt"},
                              "output": "obs://data/runs"})
    algo = body["algorithm"]
    assert algo["inputs"] == [
        {"name": "train", "access_method": "env", "local_dir": "/home/ma-user/modelarts/inputs/train",
         "remote": {"obs": {"obs_url": "/data/digits/train/"}}},
        {"name": "vocab", "access_method": "env", "local_dir": "/home/ma-user/modelarts/inputs/vocab",
         "remote": {"obs": {"obs_url": "/data/vocab.txt"}}}]
    assert algo["outputs"] == [{"name": "cloudtrain_output", "access_method": "env",
                                "local_dir": "/home/ma-user/modelarts/outputs/cloudtrain_output",
                                "remote": {"obs": {"obs_url": "/data/runs/"}}}]
    env = algo["environments"]
    assert env["CLOUDTRAIN_INPUT_TRAIN"] == "/home/ma-user/modelarts/inputs/train"
    assert env["CLOUDTRAIN_INPUT_VOCAB"] == "/home/ma-user/modelarts/inputs/vocab"
    assert env["CLOUDTRAIN_OUTPUT_DIR"] == "/home/ma-user/modelarts/outputs/cloudtrain_output"
    build(body)


def test_storage_of_another_scheme_is_refused_at_its_line_naming_obs(tmp_path):
    path = write_job(tmp_path, """
        name: st
        command: python t.py
        image: x
        storage:
          inputs: {train: "s3://data/train"}
          output: obs://data/runs/
        """)
    with pytest.raises(JobFileError, match=r"job.yaml:5: storage.inputs.train: modelarts cannot take 's3://data/train' "
                                           r"\(scheme s3\); it takes obs://"):
        get_provider("modelarts").render(load_job(path))
    clash = write_job(tmp_path, """
        name: st
        command: python t.py
        image: x
        storage:
          inputs: {data: "obs://data/train/"}
        providers:
          modelarts:
            inputs: [{name: data, obs_url: "obs://other/"}]
        """)
    with pytest.raises(JobFileError, match=r"job.yaml:5: storage.inputs.data: becomes the ModelArts input 'data'"):
        get_provider("modelarts").render(load_job(clash))


def test_render_imports_no_sdk(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: pure\ncode: .\ncommand: python t.py\nimage: i\nstorage: {output: obs://b/runs/}\n"
                   "providers: {modelarts: {code_store: obs://b/team}}\n")
    code = ("import sys\nfrom cloudtrain.commands.cli import main\nmain(sys.argv[1:])\n"
            "print('LOADED', sorted(m for m in sys.modules if m == 'obs' or m.startswith(('obs.', 'huaweicloud'))))")
    proc = subprocess.run([sys.executable, "-c", code, "render", "-p", "modelarts", str(job)], capture_output=True,
                          text=True, env=cli_env(), timeout=60)
    assert "obs/PutObject" in proc.stdout and "LOADED []" in proc.stdout, proc.stderr


# -- issue 28: fields not dropped in silence, ssh as ma-user, spot's meaning -----------------------------------
def test_rdma_on_is_exit_2_because_the_training_job_api_has_no_rdma_field():
    """The SDK's SpecResource (huaweicloudsdkmodelarts 3.1.219) takes flavor_id, node_count, pool_id,
    pool_group_id and main_container_customized_flavor: no RDMA switch (today's main dropped rdma: on)."""
    from huaweicloudsdkmodelarts.v1.model import Spec, SpecResource
    assert not [f for f in (*SpecResource.openapi_types, *Spec.openapi_types) if "rdma" in f or "roce" in f]
    with pytest.raises(JobFileError,
                       match=r"network.rdma: is on, but ModelArts Standard's training-job API has no RDMA"):
        render(network={"rdma": "on"})
    _, off = render(network={"rdma": "off"}, resources={"accelerator": "V100-32GB", "gpus_per_node": 1})
    assert off["algorithm"]["environments"]["NCCL_IB_DISABLE"] == "1"
    with pytest.raises(JobFileError, match=r"network.rdma: is off, but Ascend NPUs"):
        render({"pool_id": "pool-1"}, network={"rdma": "off"},
               resources={"accelerator": "Ascend-910B", "gpus_per_node": 8})
    _, auto = render()
    assert "NCCL_IB_DISABLE" not in auto["algorithm"]["environments"]


def test_mpi_across_nodes_is_exit_2_while_the_image_runs_as_ma_user():
    """Huawei: ModelArts runs a custom image as ma-user (UID 1000; older releases: "the default user of a
    custom image must be the user whose UID is 1101"); cloudtrain.launch.sshd starts sshd only as root
    (os.geteuid() == 0), so nodes 1+ would never listen on 22 and node 0 would wait 600 s."""
    import inspect
    from cloudtrain.launch import sshd
    assert "os.geteuid() == 0" in inspect.getsource(sshd.start_sshd)
    for kind in ("mpi", "horovod"):
        with pytest.raises(JobFileError, match=r"distribution.type: is mpi/horovod on several nodes.*uid 1000"):
            render(distribution={"type": kind, "nodes": 2})


def test_spot_says_it_is_preemption_inside_the_pool_not_a_discount():
    """The SDK's SchedulePolicy.preemptible: "是否可以被抢占" (may it be preempted), in a dedicated pool."""
    from huaweicloudsdkmodelarts.v1.model import schedule_policy
    assert "是否可以被抢占" in schedule_policy.SchedulePolicy.__init__.__doc__
    with pytest.warns(CloudtrainWarning, match="not discounted capacity"):
        _, body = render({"pool_id": "pool-1"}, spot=True)
    assert body["spec"]["schedule_policy"]["preemptible"] is True


def test_shm_gb_is_exit_2_not_dropped():
    """No model of the training-job request (Job, Spec, SpecResource, JobAlgorithm) has a /dev/shm size."""
    from huaweicloudsdkmodelarts.v1.model import Job, JobAlgorithm, Spec, SpecResource
    assert not [f for m in (Job, JobAlgorithm, Spec, SpecResource) for f in m.openapi_types if "shm" in f]
    with pytest.raises(JobFileError, match=r"resources.shm_gb: ModelArts Standard's training-job API has no /dev/shm"):
        render(resources={"shm_gb": 8})


@pytest.mark.parametrize("options", [{"code_store": "obs://b/team"}, {"code_dir": "obs://b/staged/digits/"}],
                         ids=["shipped", "staged"])
def test_the_command_passes_shellcheck(options):
    """``algorithm.command`` with the code's digest filled in, as ModelArts runs it (``/bin/sh -c``):
    clean POSIX shell, the job's own arguments quoted."""
    import subprocess
    from cloudtrain.providers.request import Placeholder, fill
    rendered = get_provider("modelarts").render(job_from_dict({
        "name": "sc", "code": str(EXAMPLES / "digits-ddp"), "image": "swr.cn-north-4.myhuaweicloud.com/o/pt:2",
        "command": "python train.py --tag 'a b; c'", "distribution": {"type": "ddp", "nodes": 2},
        "providers": {"modelarts": options}}))
    command = fill(rendered.request, {Placeholder.CODE_DIGEST: "0" * 64}).body["algorithm"]["command"]
    proc = subprocess.run(["shellcheck", "-s", "sh", "-"], input=command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_rdma_off_on_a_cpu_job_renders_nccl_ib_disable():
    """A job that names no accelerator (a CPU flavor) with network.rdma: off: the Ascend check asked
    is_npu of no accelerator, and render failed with AttributeError instead of rendering (main)."""
    _, off = render(network={"rdma": "off"})
    assert off["algorithm"]["environments"]["NCCL_IB_DISABLE"] == "1"


def test_job_retries_stay_in_the_range_modelarts_takes():
    """fault-tolerance/job-retry-num: "a value ranging from 1 to 128"; unconditional restarts stop
    after three in a row (ModelArts user guide, "Enabling Unconditional Auto Restart",
    develop-modelarts-0041).  128 is sent, 129 is refused at max_restarts, nothing sent."""
    _, body = render(max_restarts=128)
    assert body["metadata"]["annotations"]["fault-tolerance/job-retry-num"] == "128"
    with pytest.raises(JobFileError, match="max_restarts"):
        render(max_restarts=129)
