"""resources.accelerator on a generic Kubernetes cluster: every pod requires a node whose
nvidia.com/gpu.product (NVIDIA GPU Feature Discovery's label) is one of the accelerator's values,
besides the nvidia.com/gpu request; the manifests still pass the upstream CRDs."""
from __future__ import annotations

import json
import re

import pytest

from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.extend.plugins import get_provider
from cloudtrain_kubernetes.gpu_products import GFD_LABEL, products
from conftest import write_job
from crd_schemas import validate

PROVIDERS = ("kubeflow", "kubeflow-trainer", "volcano")


def gfd_sanitise(nvml_name: str) -> str:
    """GFD's label value for an NVML device name (NVIDIA/k8s-device-plugin internal/lm/resource.go,
    sanitise: drop characters outside [A-Za-z0-9-_. ], join the words with '-')."""
    return "-".join(re.sub(r"[^A-Za-z0-9-_. ]", "", nvml_name).split())


def test_values_are_gfd_labels_of_documented_nvml_names():
    """NVML names: 'NVIDIA A100-SXM4-40GB', 'NVIDIA A100-SXM4-80GB' (jax pallas gpu_info test
    configs), 'NVIDIA A100 80GB PCIe' (its XLA comment), 'NVIDIA H100 80GB HBM3' (SkyPilot's
    GFDLabelFormatter docstring: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3), 'Tesla T4' (GFD
    README's Generated Labels example Tesla-T4)."""
    assert gfd_sanitise("NVIDIA A100 80GB PCIe") == "NVIDIA-A100-80GB-PCIe"
    table = products()
    assert gfd_sanitise("NVIDIA A100-SXM4-40GB") in table["A100"]
    assert gfd_sanitise("NVIDIA A100-SXM4-80GB") in table["A100-80GB"]
    assert gfd_sanitise("NVIDIA H100 80GB HBM3") in table["H100"] and gfd_sanitise("Tesla T4") in table["T4"]
    assert not set(table["A100"]) & set(table["A100-80GB"])  # a 40 GB request never lands on an 80 GB node


def job_file(tmp_path, provider, accelerator="A100", options="{}"):
    return write_job(tmp_path, f"""
        name: acc
        command: python train.py
        image: img:1
        distribution: {{type: ddp, nodes: 2}}
        resources: {{accelerator: {accelerator}, gpus_per_node: 8}}
        providers:
          {provider}: {options}
        """)


def pod_specs(objs):
    out = []

    def walk(node):
        if isinstance(node, dict):
            if "containers" in node or ("affinity" in node and "volumes" in node):
                out.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    for obj in objs:
        walk(obj)
    return out


def render(path, overrides=None):
    job = load_job(path, overrides)
    rendered = get_provider(next(iter(job.providers))).render(job)
    objs = [a.content for a in rendered.artifacts if a.kind == "kubernetes/manifest"]
    for obj in objs:
        validate(obj)
    return objs


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_pod_requires_a_node_with_the_accelerator(tmp_path, provider):
    objs = render(job_file(tmp_path, provider))
    specs = [s for s in pod_specs(objs) if "nvidia.com/gpu" in json.dumps(s)]
    assert specs
    for spec in specs:
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term == [{"matchExpressions": [{"key": GFD_LABEL, "operator": "In", "values": products()["A100"]}]}]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_label_and_values_are_the_users_to_change(tmp_path, provider):
    mine = render(job_file(tmp_path, provider, "L4", "{gpu_label: gpu.example.com/model, gpu_products: [l4-24g]}"))
    text = json.dumps(mine)
    assert '"key": "gpu.example.com/model", "operator": "In", "values": ["l4-24g"]' in text
    off = render(job_file(tmp_path / "b", provider, "A100", "{gpu_label: ''}"))
    assert "nodeAffinity" not in json.dumps(off) and '"nvidia.com/gpu": "8"' in json.dumps(off)


def test_an_accelerator_without_known_values_is_exit_2_at_its_line(tmp_path):
    path = job_file(tmp_path, "volcano", "L4")
    with pytest.raises(JobFileError) as info:
        render(path)
    assert str(info.value).startswith(f"{path}:5: resources.accelerator: "
                                      "volcano selects nodes by nvidia.com/gpu.product")
    assert "providers.volcano.gpu_products" in str(info.value) and info.value.exit_code == 2


def test_modelarts_lite_follows_the_accelerator(tmp_path):
    """Seed 001: Ascend pods request huawei.com/ascend-1980 and select accelerator/huawei-npu:
    ascend-1980; GPUs are nvidia.com/gpu with the GFD affinity."""
    npu = json.dumps(render(job_file(tmp_path, "modelarts-lite", "Ascend-910B"), {"distribution.nodes": 3}))
    assert '"huawei.com/ascend-1980": "8"' in npu and '"accelerator/huawei-npu": "ascend-1980"' in npu
    assert "nodeAffinity" not in npu
    gpu = render(job_file(tmp_path / "b", "modelarts-lite", "A100"))
    text = json.dumps(gpu)
    assert '"nvidia.com/gpu": "8"' in text and "ascend" not in text
    spec = pod_specs(gpu)[0]
    assert spec["affinity"]["nodeAffinity"] and spec["affinity"]["podAntiAffinity"]
    path = job_file(tmp_path / "c", "modelarts-lite", "A100", "{accelerator: ascend}")
    with pytest.raises(JobFileError) as info:
        render(path)
    assert str(info.value).startswith(f"{path}:7: providers.modelarts-lite.accelerator: is ascend, but "
                                      "resources.accelerator is A100")
