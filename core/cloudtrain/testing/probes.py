"""The probes of the no-silent-drop contract (test_no_silent_drop.py): one value other than the
default for every field of the neutral job model, and what a render of it came to."""
from __future__ import annotations

import json
import warnings
from typing import Any, Dict, Iterable, List, Optional, Tuple

from pydantic import BaseModel

from cloudtrain.extend import plugins
from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.spec.errors import BadInput
from cloudtrain.spec.job import JobSpec
from cloudtrain.input.loading import job_from_dict

def cloud_providers(names: Iterable[str]) -> List[str]:
    """Those of ``names`` that run on a remote platform (``CloudProvider``: local and docker run
    the job themselves)."""
    return [name for name in names if issubclass(plugins.get_provider_class(name), CloudProvider)]


def base_job(code: str = ".") -> Dict[str, Any]:
    """The job every probe starts from (its ``code``: a small directory)."""
    return {"name": "fields", "command": "python train.py", "image": "example/train:1", "code": code,
            "distribution": {"type": "ddp", "nodes": 2}}

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
# issue 41: the launcher watches rank 0's output (its command line changes on every provider)
PROBES["stall_timeout"] = (["30m"], {})
# sent nowhere: the controller applies them after submit (AFTER_SUBMIT); max_cost is also checked
# before submit (a rate must be known: BEFORE_SUBMIT)
PROBES["restart_on"] = ([["preemption", {"exit-codes": [3]}]], {})
PROBES["max_cost"] = ([100000], {})
if "setup" in JobSpec.model_fields:  # issue 30 item 6 (branch newuser): a command run on every node before the launcher
    PROBES["setup"] = (["pip install -r requirements.txt"], {})

NOT_NEUTRAL = {"providers"}  # each provider's own section: its Options model (test_render.py)


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


def refused_at_setting(error: Optional[BadInput], provider: str) -> bool:
    """The error is at one of the provider's own settings (``providers.<provider>.<option>``): a probe
    value that disagrees with what the provider's example settings (its ``required`` examples) ask
    for.  A value the settings already ask for exactly cannot change the request (e.g. a flavor that
    is 8 x V100 and the probe's ``resources.accelerator: V100``): it agrees with the setting, which
    the probe shows by another of its values refused at that setting."""
    return error is not None and str(getattr(error, "field", "") or "").startswith(f"providers.{provider}.")


def cost_cap(job, provider: str) -> None:
    from cloudtrain.catalogs.prices import check_max_hourly_cost, estimate
    check_max_hourly_cost(job, estimate(job, provider))


# Fields no platform request carries: cloudtrain applies them itself in Provider.validate(submit=True),
# after the provider's preflight (which needs the account); the probe applies the same check after render.
def budget(job, provider: str) -> None:
    import warnings as _warnings
    from cloudtrain.catalogs.prices import estimate
    from cloudtrain.catalogs.budget import check_max_cost
    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        check_max_cost(job, estimate(job, provider))


BEFORE_SUBMIT = {"max_hourly_cost": cost_cap, "max_cost": budget}
# Fields no platform request carries because cloudtrain's controller applies them while the job
# runs (cloudtrain.orchestrate.controller): which failures restart it, and its budget.  A provider
# must accept them (or refuse them at the field); an unchanged render is not a drop.
AFTER_SUBMIT = {"restart_on": "the controller reads the platform's failure and restarts what it covers",
                "max_cost": "the controller adds each attempt's cost and cancels at the budget"}


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
