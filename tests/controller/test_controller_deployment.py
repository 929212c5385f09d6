"""deploy/controller.yaml, the controller as a one-replica Kubernetes Deployment with its home on a
PVC (docs/controller.md), validated against the Kubernetes API's types as the kubernetes SDK ships
them: its models are generated from the Kubernetes OpenAPI spec, each with ``openapi_types`` (a
field's type) and ``attribute_map`` (its JSON name).  Strict, as ``kubectl --validate=strict``:
every field known and of its type; then the SDK's deserializer builds the objects, whose setters
refuse a required field left out."""
import copy

import pytest
import yaml
from kubernetes import client as k8s

from conftest import ROOT

MANIFEST = ROOT / "deploy" / "controller.yaml"
KINDS = {("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim", ("apps/v1", "Deployment"): "V1Deployment"}
SCALARS = {"str": str, "int": int, "bool": bool, "float": (int, float), "datetime": str, "date": str}


def problems(value, type_name: str, path: str = ""):
    """Where ``value`` is not a ``type_name`` (an SDK model name, ``List[...]``, ``Dict[str, ...]``)."""
    if value is None:
        return []
    if type_name.startswith("Optional["):
        return problems(value, type_name[9:-1], path)
    if type_name.startswith(("list[", "List[")):
        if not isinstance(value, list):
            return [f"{path}: a list expected"]
        return [p for i, item in enumerate(value) for p in problems(item, type_name[5:-1], f"{path}[{i}]")]
    if type_name.startswith(("dict(", "Dict[")):
        if not isinstance(value, dict):
            return [f"{path}: a mapping expected"]
        inner = type_name[5:-1].split(", ", 1)[1]
        return [p for key, item in value.items() for p in problems(item, inner, f"{path}.{key}")]
    if type_name == "object":
        return []
    if type_name in SCALARS:
        ok = isinstance(value, SCALARS[type_name]) and not (type_name != "bool" and isinstance(value, bool))
        return [] if ok else [f"{path}: {type_name} expected, got {value!r}"]
    model = getattr(k8s, type_name)
    if not isinstance(value, dict):
        return [f"{path}: an object ({type_name}) expected"]
    fields = {json_name: model.openapi_types[attr] for attr, json_name in model.attribute_map.items()}
    out = [f"{path}.{key}: not a field of {type_name}" for key in value if key not in fields]
    return out + [p for key, item in value.items() if key in fields
                  for p in problems(item, fields[key], f"{path}.{key}")]


def check(doc):
    """The SDK model of ``doc``, after the strict walk (raises on every problem found)."""
    name = KINDS[(doc["apiVersion"], doc["kind"])]
    found = problems(doc, name, doc["kind"])
    assert not found, "\n".join(found)
    return k8s.ApiClient()._ApiClient__deserialize(copy.deepcopy(doc), name)  # required fields: ValueError


def docs():
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def test_the_manifest_is_valid_kubernetes_and_runs_one_non_root_controller_on_a_pvc():
    objects = {doc["kind"]: check(doc) for doc in docs()}
    assert set(objects) == {"PersistentVolumeClaim", "Deployment"}
    claim, deployment = objects["PersistentVolumeClaim"], objects["Deployment"]
    spec = deployment.spec
    # one controller per home, never two at once: one replica, the old pod gone before the new one
    assert spec.replicas == 1 and spec.strategy.type == "Recreate"
    assert spec.selector.match_labels.items() <= spec.template.metadata.labels.items()
    pod = spec.template.spec
    assert pod.security_context.run_as_non_root is True and pod.security_context.run_as_user != 0
    [container] = pod.containers
    assert container.command == ["cloudtrain", "controller"]
    assert container.security_context.allow_privilege_escalation is False
    assert container.security_context.read_only_root_filesystem is True
    assert container.security_context.capabilities.drop == ["ALL"]
    # the home is on the claim
    env = {e.name: e.value for e in container.env}
    volumes = {v.name: v for v in pod.volumes}
    mounts = {m.mount_path: m.name for m in container.volume_mounts}
    home_mount = next(path for path in mounts if env["CLOUDTRAIN_HOME"].startswith(path + "/"))
    assert volumes[mounts[home_mount]].persistent_volume_claim.claim_name == claim.metadata.name
    assert claim.spec.access_modes == ["ReadWriteOnce"]
    # the root file system is read-only: whatever the controller writes goes to a volume
    assert "/tmp" in mounts and volumes[mounts["/tmp"]].empty_dir is not None


@pytest.mark.parametrize("mistake", [
    lambda d: d["spec"].update(replica=1),                                    # a misspelt field
    lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image=7),  # a wrong type
    lambda d: d["spec"]["template"]["spec"].pop("containers"),                 # a required field left out
])
def test_the_validation_refuses_what_the_api_server_would(mistake):
    deployment = next(d for d in docs() if d["kind"] == "Deployment")
    mistake(deployment)
    with pytest.raises((AssertionError, ValueError)):
        check(deployment)
