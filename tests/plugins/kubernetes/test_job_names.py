"""Job names the cluster would refuse are bad input at validate (RFC 1035 labels; a TrainJob's
JobSet pod names), and every rendered object passes its CRD's CEL rules, which JSON schema
cannot see: the top-level x-kubernetes-validations of the CRDs in /work/shared/schemas."""
import re
from pathlib import Path

import pytest
import yaml

from cloudtrain.extend.plugins import get_provider
from cloudtrain.input.loading import job_from_dict
from cloudtrain.spec.errors import BadInput

ROOT = Path(__file__).resolve().parents[3]
CRDS = [ROOT.parent.parent / "shared" / "schemas" / "crds", ROOT / "tests" / "data" / "crds"]
KUBE = ["kubeflow", "volcano", "kubeflow-trainer"]


def job(name, nodes=2, type_="ddp"):
    return job_from_dict({"name": name, "command": "python train.py", "image": "pytorch/pytorch:2.4.0",
                          "code": None, "distribution": {"type": type_, "nodes": nodes}})


def job_object(provider, j):
    return get_provider(provider).render(j).artifacts[-1].content


@pytest.mark.parametrize("provider", KUBE)
def test_a_name_starting_with_a_digit_is_refused_at_validate(provider):
    """training-operator v1.9.0 pkg/webhooks/pytorch/pytorchjob_webhook.go (NameIsDNS1035Label),
    mpi-operator pkg/apis/kubeflow/validation/validation.go (ValidateMPIJob), the TrainJob CRD's
    CEL rule, Volcano's svc plugin (a Service named after the job: a DNS-1035 label)."""
    with pytest.raises(BadInput, match="RFC 1035"):
        get_provider(provider).validate(job("7b-finetune"))
    get_provider(provider).validate(job("b7-finetune"))


def crd_rules(kind):
    for directory in CRDS:
        for path in sorted(directory.glob("*.yaml")):
            crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # KubeRay's: 1.4 MB
            if crd["spec"]["names"]["kind"] == kind:
                version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
                return version["schema"]["openAPIV3Schema"].get("x-kubernetes-validations") or []
    raise AssertionError(f"no CRD for {kind}")


def cel(rule, obj):
    """The CEL rules these CRDs hold on the whole object, evaluated here; an unknown rule fails
    the test, so a new rule upstream is read before it can refuse a render."""
    name = obj["metadata"]["name"]
    matches = re.fullmatch(r"self\.metadata\.name\.matches\('(.+)'\)", rule)
    if matches:
        return re.fullmatch(matches.group(1).replace("\\\\", "\\"), name) is not None
    size = re.fullmatch(r"size\(self\.metadata\.name\) <= (\d+)", rule)
    if size:
        return len(name) <= int(size.group(1))
    raise AssertionError(f"a CEL rule this test does not evaluate: {rule}")


@pytest.mark.parametrize("name", ["digits", "a" * 52, "x" * 63])
def test_trainjobs_pass_the_crds_cel_rules_and_leave_room_for_jobset_pod_names(name):
    """kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go ValidateCreate: the longest pod name,
    placement.GenPodName(jobset, replicatedJob, maxJobIndex, maxPodIndex) + "-abcde", must be a
    DNS-1035 label (<= 63).  The default runtimes' replicated jobs are node and launcher."""
    rules = crd_rules("TrainJob")
    assert any("RFC 1035" in r["message"] for r in rules)  # the CRD does hold the rule
    for nodes, type_ in ((2, "ddp"), (12, "deepspeed")):
        obj = job_object("kubeflow-trainer", job(name, nodes, type_))
        for r in rules:
            assert cel(r["rule"], obj), (r["message"], obj["metadata"]["name"])
        jobset = obj["metadata"]["name"]
        longest = "%s-%s-0-%d-abcde" % (jobset, "launcher", nodes - 1)
        assert len(longest) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", longest)
