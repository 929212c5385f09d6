"""No neutral field is dropped in silence (issue 28, item 5; the job-file contract in
docs/job-file.md: a field is rendered, or the job is refused saying why).

Every field of the neutral job model (``cloudtrain.job.JobSpec`` and its parts, walked from the
model itself, so a field added there fails ``test_every_neutral_field_has_a_probe`` until it has a
probe here) is set to a value other than its default and rendered on every cloud provider the
installed ``cloudtrain`` entry points register (every ``CloudProvider``; local and docker run the
job themselves and are covered by tests/e2e).  Each outcome must be one of:

- the rendered request differs from the same job without the value;
- a validation error (``BadInput``) whose field or message names the field;
- a warning (``CloudtrainWarning``) whose text names the field, saying what the platform does not do.

A render identical to the job without the value, with no error or warning naming the field, is a
silent drop and fails.

Silent drops on main when this test was written (each case fails until its owner's fix merges,
as it should):
- issue 28 item 5, being fixed: ``max_restarts`` on tione (fid-cn) and kubeflow-trainer
  (fid-kube); ``network.rdma: on`` on modelarts, the Standard flavour (fid-cn);
- found by this test: ``network.rdma: on`` and ``resources.accelerator: Ascend-910B`` on
  modelarts-lite; ``resources.instance_type`` of another platform on kubeflow, kubeflow-trainer,
  volcano, modelarts-lite, tione, modelarts; ``image`` on ec2 (issue 28's "image is silently
  ignored on ec2", fid-aws); ``resources.cpus_per_node``/``memory_gb`` on sagemaker and ec2 (a
  CPU job's instance is the provider's default whatever the minimum: cloudtrain.instances.choose
  reads them only with GPUs) and on tione/modelarts (the configured ``instance_type``/``flavor_id``
  wins in silence, issue 30 item 4, fid-cn; likewise ``resources.accelerator`` and
  ``gpus_per_node`` on modelarts); ``resources.shm_gb`` on sagemaker, ec2, tione, modelarts.

Branch drops fixed those left after fid-cn and fid-kube merged (each outcome pinned to its source
in test_drops_pinned.py); ``image`` on ec2 is fid-aws's (a warning at validate).  ``max_hourly_cost``
is in no request: cloudtrain applies it before submit (``BEFORE_SUBMIT``).
"""
from __future__ import annotations

import json
import warnings
from importlib.metadata import entry_points
from typing import Any, Dict, List, Tuple

import pytest
from pydantic import BaseModel

from cloudtrain import plugins
from cloudtrain.cloud import CloudProvider
from cloudtrain.errors import BadInput
from cloudtrain.job import JobSpec
from cloudtrain.loading import job_from_dict
from conftest import EXAMPLES


def cloud_providers() -> List[str]:
    """The cloud providers the installed ``cloudtrain`` entry points register (test plugins,
    loaded through CLOUDTRAIN_PLUGINS, are not among them)."""
    installed = {ep.name for ep in entry_points(group=plugins.ENTRY_POINT_GROUP)}
    return sorted(name for name, info in plugins.providers().items()
                  if info.plugin in installed and issubclass(info.cls, CloudProvider))


PROVIDERS = cloud_providers()
BASE: Dict[str, Any] = {"name": "fields", "command": "python train.py", "image": "example/train:1",
                        "code": str(EXAMPLES / "digits-ddp"), "distribution": {"type": "ddp", "nodes": 2}}

# Data URIs in the form each platform takes (storage.inputs/output/checkpoint): every one is tried on
# every provider; a scheme a provider does not take must be refused at the field.
URIS = {
    "s3": "s3://bucket/data/train/",
    "azureml": "azureml://datastores/workspaceblobstore/paths/data/train/",
    "cos": "cos://bucket-1250000000/data/train/",
    "obs": "obs://bucket/data/train/",
    "pvc": "pvc://data/train/",
}

# field (dotted) -> (values other than the default, settings both renders share)
PROBES: Dict[str, Tuple[List[Any], Dict[str, Any]]] = {
    "name": (["fields-other"], {}),
    # code: the directory is shipped at submit (tests/plugins/*: each provider's upload), not in the
    # request; null (the image holds the code) is rendered or refused
    "code": ([None], {}),
    "command": (["python other.py --epochs 3"], {}),
    "image": (["example/other:2"], {}),
    "distribution.type": (["mpi", "horovod", "deepspeed", "ps-worker", "ray", "none"], {}),
    "distribution.nodes": ([3], {}),
    "distribution.min_nodes": ([1], {}),
    "distribution.procs_per_node": ([3], {}),
    "distribution.ps": ([2], {"distribution.type": "ps-worker", "distribution.nodes": 4}),
    "resources.gpus_per_node": ([1, 8], {}),
    "resources.accelerator": (["H100", "V100", "Ascend-910B"], {"resources.gpus_per_node": 8}),
    "resources.instance_type": (["p4d.24xlarge", "Standard_ND96asr_v4"], {}),
    # a minimum when choosing an instance: more than the default choice has
    "resources.cpus_per_node": ([90], {}),
    "resources.memory_gb": ([700], {}),
    "resources.shm_gb": ([16], {}),
    "env": ([{"CT_PROBE_VARIABLE": "probe-value"}], {}),
    "secrets": ([{"CT_PROBE_SECRET": {"from_env": "CT_PROBE_SECRET_SOURCE"}}], {}),
    # off is what auto does where the node has no fast network (the base job's): only on can differ
    "network.rdma": (["on"], {}),
    "storage.inputs": ([{"train": uri} for uri in URIS.values()], {}),
    "storage.output": (list(URIS.values()), {}),
    "storage.checkpoint": (list(URIS.values()), {}),
    "spot": ([True], {}),
    "max_runtime": (["2h"], {}),
    "max_restarts": ([2], {}),
    # sent nowhere: cloudtrain refuses the job before anything is sent (BEFORE_SUBMIT); every
    # catalog's cheapest type costs more than a cent an hour, a provider without prices refuses any cap
    "max_hourly_cost": ([0.01], {}),
}
if "setup" in JobSpec.model_fields:  # issue 30 item 6 (branch newuser): a command run on every node before the launcher
    PROBES["setup"] = (["pip install -r requirements.txt"], {})
# (provider, field, value): the provider's example settings (``required``) already ask for exactly
# this value, so the request cannot differ; the other values of the probe disagree with the setting
# and must be refused at it (they are, in the same test).
AGREES = {("modelarts", "resources.accelerator", "V100"):
          "flavor_id modelarts.vm.gpu.8v100 is 8 x V100 (check_flavor_card refuses H100 at flavor_id)"}
NOT_NEUTRAL = {"providers"}  # each provider's own section: its Options model, tests/contract/test_provider_contract.py


def neutral_fields(model=JobSpec, prefix: str = "") -> List[str]:
    """Every leaf field of the neutral job model, dotted (``storage.inputs``)."""
    found = []
    for name, info in model.model_fields.items():
        path = prefix + name
        if path in NOT_NEUTRAL:
            continue
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found += neutral_fields(kind, path + ".")
        else:
            found.append(path)
    return found


def with_values(data: Dict[str, Any], values: Dict[str, Any]) -> Dict[str, Any]:
    data = json.loads(json.dumps(data))
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        place = data
        for part in parents:
            place = place.setdefault(part, {})
        place[leaf] = value
    return data


def names_field(text: str, field: str) -> bool:
    return field in text or field.rsplit(".", 1)[-1] in text


def refuses(error: BadInput, fields) -> bool:
    """The error is about one of ``fields`` (or, for a ``resources`` field, about the sizing it
    resolves to: ``instance_type: p4d.24xlarge`` is an A100 request where no A100 is offered)."""
    where = f"{getattr(error, 'field', '') or ''} {error}"
    return any(names_field(where, f) or (f.startswith("resources.") and "resources." in where) for f in fields)


def settings(provider: str) -> Dict[str, Any]:
    """The provider's required options (its own examples), so a render can go as far as a submit's."""
    return dict(plugins.get_provider_class(provider).required)


def cost_cap(job, provider: str) -> None:
    from cloudtrain.prices import check_max_hourly_cost, estimate
    check_max_hourly_cost(job, estimate(job, provider))


# Fields no platform request carries: cloudtrain applies them itself in Provider.validate(submit=True),
# after the provider's preflight (which needs the account); the probe applies the same check after render.
BEFORE_SUBMIT = {"max_hourly_cost": cost_cap}


def outcome(provider: str, data: Dict[str, Any]):
    """(the rendered request as JSON or None, the error or None, the warnings' texts)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            job = job_from_dict(data)
            rendered = plugins.get_provider(provider).render(job)
            for field, check in BEFORE_SUBMIT.items():
                if field in data:
                    check(job, provider)
        except BadInput as exc:
            return None, exc, [str(w.message) for w in caught]
    return rendered.to_json(), None, [str(w.message) for w in caught]


def test_every_neutral_field_has_a_probe():
    assert set(neutral_fields()) == set(PROBES), "a neutral field without a probe here (or a probe of no field)"


def test_the_providers_come_from_the_entry_points():
    assert {"sagemaker", "azure", "tione", "modelarts", "kubeflow"} <= set(PROVIDERS)
    assert "fakeone" not in PROVIDERS and "local" not in PROVIDERS


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("field", sorted(PROBES))
def test_a_field_is_rendered_or_refused_or_warned_about(provider, field, monkeypatch):
    monkeypatch.setenv("CT_PROBE_SECRET_SOURCE", "probe-secret-value")
    values, shared = PROBES[field]
    base = with_values(dict(BASE, providers={provider: settings(provider)}), shared)
    before, error, _ = outcome(provider, base)
    # the job without the field renders, or is refused for what the probe needs (ps needs ps-worker)
    assert error is None or refuses(error, shared), f"the job without {field} must render on {provider}: {error}"
    silent = []
    for value in values:
        after, error, warned = outcome(provider, with_values(base, {field: value}))
        if error is not None:
            assert refuses(error, [field, *shared]), f"{field}={value!r} on {provider}: refused for another reason: {error}"
        elif after == before and not any(names_field(text, field) for text in warned) \
                and (provider, field, value) not in AGREES:
            silent.append(value)
    assert not silent, f"{provider} drops {field} in silence (render unchanged, no error, no warning) for {silent}"
