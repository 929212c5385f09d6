"""The instance type chosen for a job is the job's own: the frozen ``JobSpec`` carries no
provider's results, so a changed copy of a job chooses again."""
from __future__ import annotations

import warnings

from cloudtrain.catalogs.catalog import Catalog, Instance
from cloudtrain.catalogs.instances import InstanceRules, choose
from cloudtrain.spec.job import JobSpec

ROWS = [Instance("small-a100", "A100", 8, vcpus=96), Instance("big-h100", "H100", 8, vcpus=192)]
RULES = InstanceRules("testcloud", lambda: Catalog("testcloud", ROWS), defaults=("A100",))


def job(**resources) -> JobSpec:
    return JobSpec.model_validate({"name": "a", "command": ["python", "t.py"], "resources": resources})


def test_a_copy_with_another_accelerator_gets_its_own_instance():
    first = job(accelerator="A100", gpus_per_node=8)
    assert choose(first, RULES, None).instance_type == "small-a100"
    copy = first.model_copy(update={"resources": first.resources.model_copy(update={"accelerator": "H100"})})
    assert choose(copy, RULES, None).instance_type == "big-h100"
    assert choose(first, RULES, None).instance_type == "small-a100"


def test_the_job_model_holds_no_provider_results():
    assert set(JobSpec.__private_attributes__) == {"_source"}


def test_a_default_pick_warns_once_per_job():
    one = job(gpus_per_node=8)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        picks = {choose(one, RULES, None).instance_type for _ in range(3)}
    assert picks == {"small-a100"}
    assert len([w for w in said if "small-a100" in str(w.message)]) == 1
