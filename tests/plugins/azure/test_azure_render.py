"""azure: the rendered job is what azure-ai-ml itself reads and would send.

Every distribution type's render is loaded back with ``azure.ai.ml.load_job`` (the SDK's own
schema validation) and turned into the REST body (``_to_rest_object``) that MLClient PUTs.
"""
import json
import subprocess
import sys

import pytest
import yaml

from cloudtrain.spec.errors import BadInput, CloudtrainWarning, JobFileError
from cloudtrain.input.loading import job_from_dict, load_job as load_ct_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_azure import render as render_builders
from conftest import cli_env, run_cli, write_job

azure_ml = pytest.importorskip("azure.ai.ml")
from azure.ai.ml import MpiDistribution, PyTorchDistribution, TensorFlowDistribution  # noqa: E402
from azure.ai.ml.entities import Command  # noqa: E402

WS = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/ws"

# type -> (SDK distribution class or None, REST distribution, instance count) for 3 nodes x 2 processes
EXPECTED = {
    "ddp": (PyTorchDistribution, {"distributionType": "PyTorch", "processCountPerInstance": 1}),
    "deepspeed": (PyTorchDistribution, {"distributionType": "PyTorch", "processCountPerInstance": 1}),
    "mpi": (MpiDistribution, {"distributionType": "Mpi", "processCountPerInstance": 2}),
    "horovod": (MpiDistribution, {"distributionType": "Mpi", "processCountPerInstance": 2}),
    "ps-worker": (TensorFlowDistribution, {"distributionType": "TensorFlow", "parameterServerCount": 1,
                                           "workerCount": 2}),
    # ray: cloudtrain launch starts Ray on every node, as ddp starts torchrun (docs/providers/azure.md)
    "ray": (PyTorchDistribution, {"distributionType": "PyTorch", "processCountPerInstance": 1}),
    "none": (PyTorchDistribution, {"distributionType": "PyTorch", "processCountPerInstance": 1}),
}


def make_job(tmp_path, kind="ddp", nodes=3, procs=2, **extra):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("print('hi')\n")
    data = {"name": f"azure-{kind}", "code": "code", "command": "python train.py --epochs 1",
            "image": "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest",
            "distribution": {"type": kind, "nodes": nodes, "procs_per_node": procs},
            "env": {"OMP_NUM_THREADS": "1"}}
    data.update(extra)
    return job_from_dict(data, path=tmp_path / "job.yaml")


def render(job):
    rendered = get_provider("azure").render(job)
    [artifact] = rendered.artifacts
    assert artifact.kind == "azureml/job"
    return artifact.content


def sdk_round_trip(content, tmp_path):
    """load_job the render, resolve the assets as MLClient would, and build the REST body."""
    path = tmp_path / "job.yml"
    path.write_text(yaml.safe_dump(content, sort_keys=False))
    loaded = azure_ml.load_job(path)
    assert isinstance(loaded, Command)
    job = loaded._to_job()
    env = job.environment
    if not isinstance(env, str):  # an anonymous environment from the image: created, then referenced
        job.environment = f"{WS}/environments/{env.name}/versions/{env.version}"
    job.code = f"{WS}/codes/anonymous/versions/1"
    return loaded, job._to_rest_object().as_dict()["properties"]


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_every_distribution_round_trips_through_load_job_and_rest(kind, tmp_path):
    ps = {"ps": 1} if kind == "ps-worker" else {}
    job = make_job(tmp_path, kind, distribution={"type": kind, "nodes": 3, "procs_per_node": 2, **ps})
    content = render(job)
    loaded, rest = sdk_round_trip(content, tmp_path)
    cls, rest_dist = EXPECTED[kind]
    assert isinstance(loaded.distribution, cls)
    assert loaded.resources.instance_count == 3
    assert rest["jobType"] == "Command" and rest["resources"]["instanceCount"] == 3
    assert rest["distribution"] == rest_dist
    assert rest["environmentVariables"]["CLOUDTRAIN_DETECTORS"] == "azure=cloudtrain_azure.detect:detect"
    assert rest["environmentVariables"]["OMP_NUM_THREADS"] == "1"
    command = rest["command"]
    if kind in ("mpi", "horovod"):
        # Azure's mpirun starts every rank; each goes through the shipped rank shim
        assert "python3 -m cloudtrain.launch.mpirank -- python train.py --epochs 1" in command
        assert rest["environmentVariables"]["CLOUDTRAIN_NPROC_PER_NODE"] == "2"
    else:
        assert command.startswith('PYTHONPATH=.cloudtrain"${PYTHONPATH:+:$PYTHONPATH}" python3 -m cloudtrain.launch '
                                  f"--platform azure --type {kind} --nproc-per-node 2")
        assert command.endswith("-- python train.py --epochs 1")


def sdk_built(job):
    """The oracle: the same job built with the SDK's own ``azure.ai.ml.command()`` builder,
    as the REST body (render writes the YAML itself so that it need not import the SDK)."""
    from azure.ai.ml import Input, Output, command
    from azure.ai.ml.entities import (AmlTokenConfiguration, Environment, ManagedIdentityConfiguration,
                                      QueueSettings, UserIdentityConfiguration)
    provider = get_provider("azure")
    options = provider.options(job)
    d = job.distribution
    kwargs = dict(display_name=job.name, experiment_name=options.experiment_name or job.name,
                  command=render_builders.node_command(job), code=str(job.code_path),
                  environment=options.environment or Environment(image=job.image),
                  environment_variables=render_builders.environment_variables(job, options,
                                                                       provider.detectors_variable()),
                  instance_count=d.nodes,
                  tags={"cloudtrain.job": job.name, "cloudtrain.distribution": d.type, **options.tags})
    if d.type in ("ddp", "deepspeed") or (d.type in ("none", "ray") and d.nodes > 1):
        kwargs["distribution"] = PyTorchDistribution(process_count_per_instance=1)
    elif d.type in ("mpi", "horovod"):
        kwargs["distribution"] = MpiDistribution(process_count_per_instance=job.procs_per_node)
    elif d.type == "ps-worker":
        kwargs["distribution"] = TensorFlowDistribution(parameter_server_count=job.ps, worker_count=d.nodes - job.ps)
    if options.compute:
        kwargs["compute"] = options.compute
    elif job.resources.instance_type:
        kwargs["instance_type"] = job.resources.instance_type
    if job.resources.shm_gb:
        gb = job.resources.shm_gb
        kwargs["shm_size"] = f"{int(gb)}g" if float(gb).is_integer() else f"{round(gb * 1024)}m"
    if options.timeout:
        kwargs["timeout"] = options.timeout
    if options.job_tier or options.priority:
        kwargs["queue_settings"] = QueueSettings(job_tier=options.job_tier, priority=options.priority)
    if options.identity:
        kwargs["identity"] = {"user_identity": UserIdentityConfiguration, "managed": ManagedIdentityConfiguration,
                              "aml_token": AmlTokenConfiguration}[options.identity]()

    def data(ref, cls):
        return cls(type=ref.type, **{k: v for k, v in (("path", ref.path), ("mode", ref.mode)) if v})
    if options.inputs:
        kwargs["inputs"] = {k: data(v, Input) for k, v in options.inputs.items()}
    if options.outputs:
        kwargs["outputs"] = {k: data(v, Output) for k, v in options.outputs.items()}
    built = command(**kwargs)._to_job()
    env = built.environment
    if isinstance(env, str):  # load_job drops the azureml: prefix, command() keeps it; MLClient resolves both
        built.environment = env[len("azureml:"):] if env.startswith("azureml:") else env
    else:
        built.environment = f"{WS}/environments/{env.name}/versions/{env.version}"
    built.code = f"{WS}/codes/anonymous/versions/1"
    return built._to_rest_object().as_dict()["properties"]


ORACLE_CASES = {
    **{kind: {"distribution": {"type": kind, "nodes": 3, "procs_per_node": 2,
                               **({"ps": 1} if kind == "ps-worker" else {})}}
       for kind in EXPECTED},
    "single-node": {"distribution": {"type": "none", "nodes": 1}},
    "cluster-options": {
        "command": "python train.py --data ${{inputs.digits}} --out ${{outputs.model}}",
        "resources": {"shm_gb": 8},
        "providers": {"azure": {"compute": "gpu-cluster", "experiment_name": "exp", "timeout": 3600,
                                "job_tier": "spot", "priority": "high", "identity": "managed", "tags": {"team": "ml"},
                                "inputs": {"digits": "azureml://datastores/workspaceblobstore/paths/digits/",
                                           "one": {"type": "uri_file", "path": "https://x/y.csv", "mode": "download"}},
                                "outputs": {"model": {"type": "uri_folder", "mode": "upload"}}}}},
    "serverless": {"resources": {"instance_type": "Standard_NC24rs_v3", "shm_gb": 1.5}},
    "registered-environment": {"providers": {"azure": {"compute": "c", "environment": "azureml:acpt-pytorch@latest",
                                                       "identity": "user_identity", "job_tier": "basic"}}},
    "aml-token": {"providers": {"azure": {"compute": "c", "identity": "aml_token", "priority": "low"}}},
}


@pytest.mark.parametrize("case", sorted(ORACLE_CASES))
def test_render_sends_what_the_sdks_command_builder_sends(case, tmp_path):
    job = make_job(tmp_path, **ORACLE_CASES[case])
    _, rest = sdk_round_trip(render(job), tmp_path)
    assert rest == sdk_built(job)


def test_single_node_none_has_no_distribution(tmp_path):
    content = render(make_job(tmp_path, "none", nodes=1, procs=1))
    assert "distribution" not in content
    loaded, rest = sdk_round_trip(content, tmp_path)
    assert loaded.distribution is None and rest.get("distribution") is None
    assert rest["resources"]["instanceCount"] == 1


def test_options_map_to_the_job(tmp_path):
    job = make_job(
        tmp_path, command="python train.py --data ${{inputs.digits}} --out ${{outputs.model}}",
        resources={"shm_gb": 8},
        providers={"azure": {"compute": "gpu-cluster", "experiment_name": "exp", "timeout": 3600,
                             "job_tier": "spot", "priority": "high", "identity": "managed",
                             "tags": {"team": "ml"},
                             "inputs": {"digits": "azureml://datastores/workspaceblobstore/paths/digits/"},
                             "outputs": {"model": {"type": "uri_folder", "mode": "upload"}}}})
    content = render(job)
    assert content["compute"] == "azureml:gpu-cluster"
    assert content["code"] == str(tmp_path / "code")  # the job's code; submit points it at the staged copy
    assert "name" not in content  # the name carries the spec hash: submit sets it
    assert content["display_name"] == "azure-ddp" and content["experiment_name"] == "exp"
    assert content["tags"] == {"cloudtrain.job": "azure-ddp", "cloudtrain.distribution": "ddp", "team": "ml"}
    assert "'${{inputs.digits}}'" in content["command"]
    loaded, rest = sdk_round_trip(content, tmp_path)
    assert rest["computeId"] == "gpu-cluster"
    assert rest["resources"]["shmSize"] == "8g"
    assert rest["limits"]["timeout"] == "PT1H"
    assert rest["queueSettings"] == {"jobTier": "Spot", "priority": 3}
    assert rest["identity"]["identityType"] == "Managed"
    assert rest["inputs"]["digits"] == {"jobInputType": "uri_folder",
                                        "uri": "azureml://datastores/workspaceblobstore/paths/digits/"}
    assert rest["outputs"]["model"]["jobOutputType"] == "uri_folder" and rest["outputs"]["model"]["mode"] == "Upload"


def test_serverless_compute_takes_the_instance_type(tmp_path):
    content = render(make_job(tmp_path, resources={"instance_type": "Standard_NC24rs_v3", "shm_gb": 1.5}))
    assert "compute" not in content
    _, rest = sdk_round_trip(content, tmp_path)
    assert rest["resources"]["instanceType"] == "Standard_NC24rs_v3"
    assert rest["resources"]["shmSize"] == "1536m"
    # an InfiniBand size with rdma auto: the NCCL/UCX presets are in the render
    assert rest["environmentVariables"]["NCCL_IB_DISABLE"] == "0"
    # Microsoft's NCCL settings for the ND A100 v4 series (Azure HPC blog, "Performance considerations
    # for large scale deep learning training on Azure NDv4 (A100) series"): UCX on TCP over eth0
    assert rest["environmentVariables"]["UCX_TLS"] == "tcp"
    assert rest["environmentVariables"]["UCX_NET_DEVICES"] == "eth0"
    # no NCCL_TOPO_FILE: /opt/microsoft/ndv4-topo.xml is a file of the HPC host image, not of the container
    assert "NCCL_TOPO_FILE" not in rest["environmentVariables"]


def test_rdma_presets_never_override_the_jobs_env(tmp_path):
    job = make_job(tmp_path, env={"NCCL_SOCKET_IFNAME": "ib0"},
                   providers={"azure": {"compute": "c", "vm_size": "Standard_ND96asr_v4"}})
    env = render(job)["environment_variables"]
    assert env["NCCL_SOCKET_IFNAME"] == "ib0" and env["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    off = render(make_job(tmp_path, network={"rdma": "off"}, providers={"azure": {"compute": "c"}}))
    assert off["environment_variables"]["NCCL_IB_DISABLE"] == "1"
    plain = render(make_job(tmp_path, providers={"azure": {"compute": "c", "vm_size": "Standard_NC24s_v3"}}))
    assert not [k for k in plain["environment_variables"] if k.startswith(("NCCL_", "UCX_"))]


def test_secrets_are_left_out_of_the_render(tmp_path, monkeypatch):
    monkeypatch.setenv("CT_AZURE_TOKEN", "very-secret-value")
    content = render(make_job(tmp_path, secrets={"HF_TOKEN": {"from_env": "CT_AZURE_TOKEN"}}))
    text = json.dumps(content)
    assert "very-secret-value" not in text and "HF_TOKEN" not in text


def test_render_needs_an_image_or_an_environment(tmp_path):
    with pytest.raises(JobFileError, match="needs an image"):
        render(make_job(tmp_path, image=None))
    content = render(make_job(tmp_path, image=None,
                              providers={"azure": {"environment": "azureml:acpt-pytorch@latest"}}))
    assert content["environment"] == "azureml:acpt-pytorch@latest"


def test_undeclared_inputs_and_restarts_are_bad_input(tmp_path):
    with pytest.raises(JobFileError, match=r"inputs\.data.*declare it"):
        render(make_job(tmp_path, command="python train.py ${{inputs.data}}"))



def test_restarts_are_the_controllers(tmp_path):
    """Azure ML does not restart command jobs: the request has no restart, the controller makes them."""
    import warnings
    from cloudtrain.orchestrate.controller import needs_following
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        job = make_job(tmp_path, max_restarts=2)
        render(job)
    assert any("max_restarts" in str(w.message) and "controller submits the job again" in str(w.message)
               for w in caught)
    assert needs_following(job, "azure")


def warned(job):
    """The render's content and the text of every CloudtrainWarning it gave."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        content = render(job)
    return content, [str(w.message) for w in caught if issubclass(w.category, CloudtrainWarning)]


def test_spot_on_a_compute_cluster_is_the_clusters_tier_and_render_says_so(tmp_path):
    serverless, said = warned(make_job(tmp_path, spot=True))
    assert serverless["queue_settings"] == {"job_tier": "spot"} and not said
    cluster, said = warned(make_job(tmp_path, spot=True, providers={"azure": {"compute": "gpu-cluster"}}))
    assert "queue_settings" not in cluster
    assert [t for t in said if "spot:" in t and "gpu-cluster" in t and "tier" in t]


def test_an_accelerator_on_a_compute_cluster_is_named_as_unchecked_offline(tmp_path):
    job = make_job(tmp_path, resources={"accelerator": "A100", "gpus_per_node": 8},
                   providers={"azure": {"compute": "gpu-cluster"}})
    content, said = warned(job)
    assert "instance_type" not in content["resources"]
    assert [t for t in said if "resources.accelerator:" in t and "gpu-cluster" in t and "vm_size" in t]
    # the cluster's size named: checked at render, a mismatch is exit 2 at the field
    with pytest.raises(JobFileError) as info:
        render(make_job(tmp_path, resources={"accelerator": "H100", "gpus_per_node": 8},
                        providers={"azure": {"compute": "gpu-cluster", "vm_size": "Standard_ND96asr_v4"}}))
    assert "Standard_ND96asr_v4" in str(info.value) and "H100" in str(info.value)


def test_cpus_and_memory_are_checked_or_named(tmp_path):
    _, said = warned(make_job(tmp_path, resources={"cpus_per_node": 32}))
    assert [t for t in said if "resources.cpus_per_node:" in t and "providers.azure.vm_size" in t]
    with pytest.raises(JobFileError, match=r"resources\.memory_gb: is more than VM size Standard_ND96asr_v4"):
        render(make_job(tmp_path, resources={"memory_gb": 4000, "accelerator": "A100", "gpus_per_node": 8},
                        providers={"azure": {"vm_size": "Standard_ND96asr_v4"}}))


def test_secrets_left_out_of_a_render_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CT_AZURE_TOKEN", "very-secret-value")
    _, said = warned(make_job(tmp_path, secrets={"HF_TOKEN": {"from_env": "CT_AZURE_TOKEN"}}))
    assert [t for t in said if "secrets:" in t and "HF_TOKEN" in t] and "very-secret-value" not in " ".join(said)


# -- the InfiniBand rule -------------------------------------------------------------------
@pytest.mark.parametrize("size,ib", [
    ("Standard_NC24rs_v3", True), ("Standard_NC24s_v3", False), ("Standard_NC24r", False),
    ("Standard_ND96asr_v4", True), ("Standard_ND96amsr_A100_v4", True), ("Standard_ND96isr_H100_v5", True),
    ("Standard_ND40rs_v2", True), ("Standard_HB120-96rs_v3", True), ("Standard_NC96ads_A100_v4", False),
    ("Standard_D4s_v3", False), ("standard_nd96asr_v4", True)])
def test_infiniband_sizes(size, ib):
    from cloudtrain_azure import infiniband
    assert infiniband.has_infiniband(size) is ib
    assert (infiniband.rdma_problem(size) is None) is ib


def test_rdma_on_with_a_size_without_infiniband_names_it_and_suggests_one(tmp_path):
    job = make_job(tmp_path, network={"rdma": "on"},
                   providers={"azure": {"compute": "c", "vm_size": "Standard_NC24s_v3"}})
    with pytest.raises(JobFileError) as info:
        render(job)
    message = str(info.value)
    # the suggestion is a size with InfiniBand that is not retired (NC24rs_v3 retired 2025-09-30 with all NCv3)
    assert "Standard_NC24s_v3" in message and "InfiniBand)" in message and "network.rdma" in message
    assert "use Standard_NC24rs_v3" not in message
    with pytest.raises(JobFileError, match="lacks the SR-IOV"):
        render(make_job(tmp_path, network={"rdma": "on"}, resources={"instance_type": "Standard_NC24r"}))
    with pytest.raises(JobFileError, match="serverless compute has no VM size"):
        render(make_job(tmp_path, network={"rdma": "on"}))
    # a cluster whose size is unknown offline: checked at submit (compute.get), not at render
    assert render(make_job(tmp_path, network={"rdma": "on"}, providers={"azure": {"compute": "c"}}))


def test_cli_rdma_mismatch_is_exit_2_at_the_job_files_line(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    path = write_job(tmp_path, """
        name: ib-check
        command: python train.py
        image: example/train:1
        distribution: {type: ddp, nodes: 2}
        network:
          rdma: "on"   # quoted: YAML 1.1 reads a bare on as true
        providers:
          azure: {compute: gpu-cluster, vm_size: Standard_NC24s_v3}
        """)
    proc = run_cli("validate", "-p", "azure", path, check=2)
    # the catalog's row (Azure's NCv3 page: NC24s_v3 without InfiniBand) and its nearest InfiniBand twin
    assert f"{path}:6: network.rdma: is on, but Standard_NC24s_v3 (V100 x 4) has no fast network" in proc.stderr
    assert "InfiniBand)" in proc.stderr and "use Standard_NC24rs_v3" not in proc.stderr and proc.stdout == ""


def test_an_accelerator_resolves_the_serverless_vm_size_and_its_infiniband_presets(tmp_path):
    def render(resources, **more):
        data = {"name": "acc", "command": "python t.py", "image": "example/train:1",
                "distribution": {"type": "ddp", "nodes": 2}, "resources": resources, **more}
        return get_provider("azure").render(job_from_dict(data)).artifacts[0].content
    # Azure's size pages: ND A100 v4 = 8 x A100 40 GB with InfiniBand; ND H100 v5 = 8 x H100
    a100 = render({"accelerator": "A100", "gpus_per_node": 8})
    assert a100["resources"]["instance_type"] == "Standard_ND96asr_v4"
    assert a100["environment_variables"]["UCX_TLS"] == "tcp"  # InfiniBand: a fact of the row
    assert render({"accelerator": "A100-80GB", "gpus_per_node": 8})["resources"]["instance_type"] == \
        "Standard_ND96amsr_A100_v4"
    assert render({"accelerator": "H100", "gpus_per_node": 8})["resources"]["instance_type"] == \
        "Standard_ND96isr_H100_v5"
    t4 = render({"accelerator": "T4", "gpus_per_node": 1})
    assert t4["resources"]["instance_type"] == "Standard_NC4as_T4_v3" and "UCX_TLS" not in t4["environment_variables"]
    # gpus alone: the documented default for that count, no longer no GPU request at all
    with pytest.warns(CloudtrainWarning, match="Standard_ND96asr_v4"):
        assert render({"gpus_per_node": 8})["resources"]["instance_type"] == "Standard_ND96asr_v4"
    # another platform's type is never sent raw: its accelerator and count are resolved here
    with pytest.warns(CloudtrainWarning, match="p4d.24xlarge is ec2's"):
        assert render({"instance_type": "p4d.24xlarge"})["resources"]["instance_type"] == "Standard_ND96asr_v4"


def test_cli_render_json(tmp_path):
    job = load_ct_job(write_job(tmp_path, """
        name: digits
        command: python train.py
        image: example/train:1
        distribution: {type: mpi, nodes: 2, procs_per_node: 4}
        providers: {azure: {compute: cpu-cluster}}
        """))
    proc = run_cli("render", "-p", "azure", "-o", "json", job.source.path, check=0)
    envelope = json.loads(proc.stdout)
    assert envelope["provider"] == "azure" and envelope["job"] == "digits"
    [artifact] = envelope["artifacts"]
    assert artifact["kind"] == "azureml/job"
    assert artifact["content"]["distribution"] == {"type": "mpi", "process_count_per_instance": 4}
    assert artifact["content"]["resources"]["instance_count"] == 2
    assert "experimental" not in proc.stderr  # the SDK's chatter is kept out


def test_render_of_another_provider_does_not_import_azure(tmp_path):
    path = write_job(tmp_path, """
        name: plain
        command: python -c pass
        distribution: {type: ddp, nodes: 2}
        """)
    code = ("import sys, io, contextlib\n"
            "from cloudtrain.commands.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['render', '-p', 'local', {str(path)!r}]) == 0\n"
            "print(sorted(m for m in sys.modules if m.startswith('azure')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_submit_refuses_secrets_before_sending_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("CT_AZURE_TOKEN", "very-secret-value")
    job = make_job(tmp_path, secrets={"HF_TOKEN": {"from_env": "CT_AZURE_TOKEN"}})

    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError("nothing may be sent")

    with pytest.raises(BadInput, match=r"secrets: HF_TOKEN cannot be sent to Azure ML.*Key Vault"):
        get_provider("azure", ml_client=Untouchable()).submit(job)


@pytest.mark.parametrize("nodes", [1, 3])
def test_mpi_ranks_get_the_masters_address_from_azures_own_variables(nodes, tmp_path):
    # Azure ML's mpirun starts every rank (no `cloudtrain launch`): the command's prelude exports
    # CLOUDTRAIN_MASTER_ADDR/PORT/HOSTS from the variables Azure sets on each rank, and must agree
    # with cloudtrain_azure.detect, which reads the same ones (run in a real shell here)
    from cloudtrain_azure import detect
    content = render(make_job(tmp_path, kind="mpi", nodes=nodes))
    prelude = content["command"].split("PYTHONPATH=", 1)[0]
    hosts = [f"10.0.0.{i + 4}" for i in range(nodes)]
    azure_env = detect.node_environment("mpi", nodes, nodes - 1, hosts, 6000)
    shown = subprocess.run(["sh", "-c",
                            prelude + 'echo "$CLOUDTRAIN_MASTER_ADDR $CLOUDTRAIN_MASTER_PORT $CLOUDTRAIN_HOSTS"'],
                           env={"PATH": "/usr/bin:/bin", **azure_env}, capture_output=True, text=True, check=True)
    topo = detect.detect(azure_env)
    assert shown.stdout.split() == [topo.master_addr, str(topo.master_port), ",".join(topo.hosts)]
