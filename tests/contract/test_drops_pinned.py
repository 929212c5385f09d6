"""What each provider does with a neutral field it once dropped in silence (issue 28 item 5), pinned
to the platform's own source; tests/contract/test_no_silent_drop.py checks that every field has
some outcome, these check that the outcome is the right one.

- SageMaker has no /dev/shm setting: no member of CreateTrainingJob's input in botocore's
  service model (the request's only schema) sizes shared memory, so ``resources.shm_gb`` exits 2.
- EC2 runs the job on the AMI itself, whose /dev/shm is a tmpfs (tmpfs(5): "size" is the mount's
  limit, remountable): the node script resizes it.
- A CPU job's ``cpus_per_node``/``memory_gb`` on SageMaker/EC2, whose catalogs list no CPU-only
  type: the default m5.xlarge (4 vCPUs, 16 GiB: AWS's M5 page) when it has them, else exit 2.
- Kubernetes without a catalog: ``resources.instance_type`` is its accelerator x count (the
  docs/job-file.md row), on nodes NVIDIA GPU Feature Discovery labels with that card.
- ModelArts: a flavor id names its card count (``modelarts.vm.gpu.8v100``: 8); ModelArts Lite on
  Ascend: the ranktable-routing guide's manifest names no chip and no RDMA device.
"""
from __future__ import annotations

import json
import warnings

import botocore.session
import pytest

from cloudtrain.extend import plugins
from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.input.loading import job_from_dict
from conftest import EXAMPLES

SAGEMAKER = {"role_arn": "arn:aws:iam::123456789012:role/train", "output_s3": "s3://ct-bucket/runs"}


def job(provider, options=None, **fields):
    data = {"name": "drops", "command": "python train.py", "image": "example/train:1",
            "code": str(EXAMPLES / "digits-ddp"), "distribution": {"type": "ddp", "nodes": 2},
            "providers": {provider: dict(options or plugins.get_provider_class(provider).required)}}
    for dotted, value in fields.items():
        *parents, leaf = dotted.split("__")
        place = data
        for part in parents:
            place = place.setdefault(part, {})
        place[leaf] = value
    return job_from_dict(data)


def rendered(provider, j):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = plugins.get_provider(provider).render(j)
    return json.loads(out.to_json()), [str(w.message) for w in caught if issubclass(w.category, CloudtrainWarning)]


def leaf_paths(shape, path="", seen=frozenset()):
    if shape.name in seen:
        return
    seen = seen | {shape.name}
    if shape.type_name == "structure":
        for name, member in shape.members.items():
            yield from leaf_paths(member, f"{path}.{name}", seen)
    elif shape.type_name == "list":
        yield from leaf_paths(shape.member, path + "[]", seen)
    elif shape.type_name == "map":
        yield from leaf_paths(shape.value, path + "{}", seen)
    else:
        yield path


def test_sagemaker_has_no_shm_field_so_shm_gb_exits_2():
    model = botocore.session.get_session().get_service_model("sagemaker")
    fields = list(leaf_paths(model.operation_model("CreateTrainingJob").input_shape))
    assert ".ResourceConfig.InstanceType" in fields  # the walk reaches the sizing shape
    assert not [f for f in fields if "shm" in f.lower() or "sharedmemory" in f.lower()]
    with pytest.raises(JobFileError) as err:
        rendered("sagemaker", job("sagemaker", SAGEMAKER, resources__shm_gb=16))
    assert err.value.field == "resources.shm_gb"


def test_ec2_resizes_the_amis_dev_shm():
    (request, _), (sized, _) = (rendered("ec2", job("ec2")), rendered("ec2", job("ec2", resources__shm_gb=16)))
    script = json.dumps(next(a["content"] for a in sized["artifacts"] if a["kind"] == "shell/script"))
    assert "mount -o remount,size=16384m /dev/shm" in script
    assert "/dev/shm" not in json.dumps(request)


@pytest.mark.parametrize("provider,options,default",
                         [("sagemaker", SAGEMAKER, "ml.m5.xlarge"), ("ec2", None, "m5.xlarge")])
def test_a_cpu_jobs_minimums_are_met_or_refused(provider, options, default):
    small, _ = rendered(provider, job(provider, options, resources__cpus_per_node=4, resources__memory_gb=16))
    assert default in json.dumps(small)
    for field, value in (("cpus_per_node", 8), ("memory_gb", 32)):
        with pytest.raises(JobFileError) as err:
            rendered(provider, job(provider, options, **{f"resources__{field}": value}))
        assert err.value.field == f"resources.{field}" and f"providers.{provider}.instance_type" in str(err.value)


@pytest.mark.parametrize("provider", ["kubeflow", "volcano", "kubeflow-trainer"])
def test_kubernetes_runs_another_platforms_instance_type_as_its_cards(provider):
    request, warned = rendered(provider, job(provider, resources__instance_type="p4d.24xlarge"))
    text = json.dumps(request)
    assert '"nvidia.com/gpu": "8"' in text or '"nvidia.com/gpu": 8' in text
    assert "A100" in text  # GPU Feature Discovery's product label values for A100
    assert any("resources.instance_type p4d.24xlarge" in w and "node.kubernetes.io/instance-type" in w for w in warned)
    with pytest.raises(JobFileError) as err:
        rendered(provider, job(provider, resources__instance_type="no-such.type"))
    assert err.value.field == "resources.instance_type"


def test_modelarts_flavor_names_its_card_count():
    with pytest.raises(JobFileError) as err:
        # required flavor_id: modelarts.vm.gpu.8v100
        rendered("modelarts", job("modelarts", resources__gpus_per_node=1))
    assert err.value.field == "providers.modelarts.flavor_id" and "resources.gpus_per_node is 1" in str(err.value)
    _, warned = rendered("modelarts", job("modelarts", resources__cpus_per_node=90))
    assert any("resources.cpus_per_node" in w and "not checked" in w for w in warned)


def test_modelarts_lite_on_ascend_says_what_it_does_not_choose():
    _, warned = rendered("modelarts-lite", job("modelarts-lite", resources__accelerator="Ascend-910B",
                                               resources__gpus_per_node=8, network__rdma="on"))
    assert any(w.startswith("resources.accelerator is Ascend-910B") for w in warned)
    assert any(w.startswith("network.rdma is on") and "hccn.conf" in w for w in warned)
