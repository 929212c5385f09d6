"""resources.accelerator: one job file, the right instance on every provider with a catalog, and
``cloudtrain resources`` listing the catalogs' rows."""
from __future__ import annotations

import json
import warnings

import pytest

from cloudtrain.catalogs import catalog
from cloudtrain.extend import plugins
from cloudtrain.spec.accelerators import canonical
from cloudtrain.spec.errors import JobFileError
from cloudtrain.catalogs.instances import nearest_with_network
from cloudtrain.input.loading import job_from_dict
from conftest import EXAMPLES, run_cli, write_job

# AWS: EC2 DescribeInstanceTypes (p4d = 8 x A100 40 GB, 4 EFA; p5 = 8 x H100, 32 EFA);
# Azure: its size pages (ND A100 v4 = ND96asr_v4; ND H100 v5 = ND96isr_H100_v5)
EXPECTED = {
    "A100": {"sagemaker": "ml.p4d.24xlarge", "ec2": "p4d.24xlarge", "azure": "Standard_ND96asr_v4",
             "eks": ("p4d.24xlarge", "4")},
    "H100": {"sagemaker": "ml.p5.48xlarge", "ec2": "p5.48xlarge", "azure": "Standard_ND96isr_H100_v5",
             "eks": ("p5.48xlarge", "32")},
}


def one_job(accelerator):
    return job_from_dict({
        "name": "big", "command": "python train.py", "image": "registry.example/train:1",
        "code": str(EXAMPLES / "digits-ddp"),  # not `.`: the whole repository would not fit a ConfigMap
        "distribution": {"type": "ddp", "nodes": 2}, "resources": {"accelerator": accelerator, "gpus_per_node": 8},
        "providers": {"ec2": {"subnet_id": "subnet-1"}, "eks": {"cluster": "c"}}})


def artifact(provider, job, kind):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        rendered = plugins.get_provider(provider).render(job)
    # an accelerator named: no provider warns about sizing (ec2 says only that it runs no image)
    assert [str(w.message) for w in said if not str(w.message).startswith("image: ec2 runs the job on")] == []
    return next(a.content for a in rendered.artifacts if a.kind == kind)


@pytest.mark.parametrize("accelerator", sorted(EXPECTED))
def test_one_job_file_renders_the_right_instance_on_every_provider(accelerator, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the code directory (`.`): not the repository, whose size is not the point
    (tmp_path / "train.py").write_text("print('hi')\n")
    job, want = one_job(accelerator), EXPECTED[accelerator]
    training_job = artifact("sagemaker", job, "sagemaker/CreateTrainingJob")
    assert training_job["ResourceConfig"]["InstanceType"] == want["sagemaker"]
    run = artifact("ec2", job, "ec2/RunInstances")
    efa = [n for n in run["NetworkInterfaces"] if n["InterfaceType"] in ("efa", "efa-only")]
    assert run["InstanceType"] == want["ec2"] and len(efa) == int(want["eks"][1])  # one per EFA device
    assert artifact("azure", job, "azureml/job")["resources"]["instance_type"] == want["azure"]
    rendered = plugins.get_provider("eks").render(job)
    pod = rendered.artifacts[-1].content["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": want["eks"][0]}
    assert pod["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == want["eks"][1]


def test_names_are_folded_and_unknown_ones_rejected_with_the_known_list(tmp_path):
    assert canonical("a100") == "A100" and canonical("NVIDIA_A100_80GB") == "A100-80GB"
    assert canonical("910b") == "Ascend-910B"
    path = write_job(tmp_path, """
        name: x
        command: python t.py
        resources:
          gpus_per_node: 8
          accelerator: A1000
        """)
    proc = run_cli("validate", path, check=2)
    assert f"{path}:5: resources.accelerator: unknown accelerator 'A1000'; known: " in proc.stderr
    assert "A100-80GB" in proc.stderr and "Ascend-910B" in proc.stderr


def test_an_accelerator_needs_a_count():
    with pytest.raises(JobFileError, match="accelerator A100 needs gpus_per_node"):
        job_from_dict({"name": "x", "command": "c", "resources": {"accelerator": "A100"}})


def test_the_nearest_instance_with_a_fast_network_keeps_the_accelerator_then_the_count():
    rows = [catalog.Instance("a", "T4", 1, vcpus=4), catalog.Instance("b", "T4", 4, vcpus=64, efa=1),
            catalog.Instance("c", "A10G", 1, vcpus=32, efa=1), catalog.Instance("d", "T4", 8, vcpus=96, efa=1)]
    assert nearest_with_network(rows, rows[0]).instance_type == "b"  # T4 (x4) before A10G x 1
    assert nearest_with_network(rows[2:3], rows[0]).instance_type == "c"  # no T4 with one: another accelerator
    assert nearest_with_network(rows[:1], rows[0]) is None


def test_cli_lists_every_matching_row_across_providers():
    proc = run_cli("resources", "--accelerator", "a100", "--gpus", "8", "-o", "json", check=0)
    found = {(r["provider"], r["instance_type"]) for r in json.loads(proc.stdout)}
    assert {("sagemaker", "ml.p4d.24xlarge"), ("ec2", "p4d.24xlarge"), ("eks", "p4d.24xlarge"),
            ("azure", "Standard_ND96asr_v4")} <= found
    assert all(r[1] != "p4de.24xlarge" for r in found)  # A100 is the 40 GB part; A100-80GB is its own name
    table = run_cli("resources", "--accelerator", "H100", "-p", "ec2", check=0).stdout
    assert "p5.48xlarge" in table and "EFA x32 (RDMA read)" in table and "azure" not in table
    assert run_cli("resources", "--accelerator", "TPU", check=2).stderr.startswith("cloudtrain: error: --accelerator")
