"""Upstream CRD schemas (tests/data/crds) as validators for rendered Kubernetes manifests.

OpenAPI v3 structural schemas converted to JSON Schema; shared by every plugin that renders
Kubernetes objects (kubernetes, aws's eks, modelarts-lite).
"""
import base64
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional

import jsonschema
import yaml

from cloudtrain_kubernetes import manifests as m

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "data" / "crds"  # the upstream CRDs, unchanged (see its README)
INT_RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# -- OpenAPI v3 (structural CRD schema) -> JSON Schema ------------------------------------------
def to_json_schema(node, strict=True):
    """Convert a CRD's openAPIV3Schema.  ``strict``: unknown fields are errors (what
    ``kubectl --validate=strict`` / server-side field validation does), except under
    ``x-kubernetes-preserve-unknown-fields``."""
    if isinstance(node, list):
        return [to_json_schema(n, strict) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {k: to_json_schema(v, strict) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value, strict)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = to_json_schema(value, strict)
        elif key == "format":
            if value in INT_RANGES:
                out["minimum"] = max(node.get("minimum", INT_RANGES[value][0]), INT_RANGES[value][0])
                out["maximum"] = min(node.get("maximum", INT_RANGES[value][1]), INT_RANGES[value][1])
            # other formats (date-time, ...) are not asserted
        elif key in ("minimum", "maximum") and "format" in node and node["format"] in INT_RANGES:
            continue  # merged above
        elif key == "nullable":
            continue  # handled below
        elif key.startswith("x-kubernetes-") or key in ("description", "default", "example", "externalDocs"):
            if key in ("x-kubernetes-list-map-keys", "x-kubernetes-list-type"):
                out[key] = value  # checked by the extended validator
            # int-or-string, preserve-unknown-fields: below; embedded-resource, map-type,
            # validations (CEL, only immutability rules in these CRDs): not asserted
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.pop("anyOf", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (strict and node.get("type") == "object" and "properties" in node
            and "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _list_map_keys(validator, keys, instance, schema):
    if not isinstance(instance, list) or schema.get("x-kubernetes-list-type") != "map":
        return
    seen = set()
    for item in instance:
        key = tuple(item.get(k) for k in keys) if isinstance(item, dict) else item
        if key in seen:
            yield jsonschema.ValidationError(f"duplicate entry for list-map keys {keys}: {key}")
        seen.add(key)


def _list_type(validator, kind, instance, schema):
    if kind == "set" and isinstance(instance, list) and len(set(map(json.dumps, instance))) != len(instance):
        yield jsonschema.ValidationError("duplicate items in a list-type set")


K8sValidator = jsonschema.validators.extend(jsonschema.Draft7Validator, {
    "x-kubernetes-list-map-keys": _list_map_keys, "x-kubernetes-list-type": _list_type})


@lru_cache(maxsize=None)
def crd_validators(group: Optional[str] = None):
    """``{(apiVersion, kind): validator}`` for every served version of every CRD file, or of the
    files of one API ``group`` (named ``<group>_<plural>...yaml``): KubeRay's RayJob CRD is 1.4 MB
    and takes seconds to parse, which a test of another group's objects need not pay."""
    out = {}
    for path in sorted(CRDS.glob(f"{group}_*.yaml" if group else "*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
            for version in doc["spec"]["versions"]:
                schema = to_json_schema(version["schema"]["openAPIV3Schema"])
                out[(f"{group}/{version['name']}", kind)] = K8sValidator(schema)
    return out


def validate(obj):
    """Validate ``obj`` against its CRD (or, for core objects, a few structural rules)."""
    meta = obj["metadata"]
    name_ok = m.DNS1123_LABEL if obj["kind"] in ("PyTorchJob", "MPIJob", "TFJob", "Job") else DNS1123_SUBDOMAIN
    assert name_ok.match(meta["name"]) and len(meta["name"]) <= 63, meta["name"]
    assert meta["labels"][m.LABEL_JOB] and meta["labels"][m.LABEL_PROVIDER]
    assert re.fullmatch(r"[0-9a-f]{64}", meta["annotations"][m.ANNOTATION_HASH])
    for value in meta["labels"].values():
        assert len(value) <= 63 and re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", value)
    key = (obj["apiVersion"], obj["kind"])
    if key == ("v1", "ConfigMap"):
        # ConfigMap: data and/or binaryData, keys [-._a-zA-Z0-9]+, together at most 1 MiB
        # (kubernetes pkg/apis/core/validation ValidateConfigMap: totalSize > core.MaxSecretSize).
        # A rendered binaryData value is the placeholder naming the archive's size and digest.
        assert (set(obj) <= {"apiVersion", "kind", "metadata", "data", "binaryData"}
                and ("data" in obj or "binaryData" in obj))
        entries = {**obj.get("data", {}), **obj.get("binaryData", {})}
        assert len(entries) == len(obj.get("data", {})) + len(obj.get("binaryData", {})), (
            "a key in both data and binaryData")
        assert all(re.fullmatch(r"[-._a-zA-Z0-9]+", k) and isinstance(v, str) for k, v in entries.items())
        size = sum(len(v.encode()) for v in obj.get("data", {}).values())
        for value in obj.get("binaryData", {}).values():
            placeholder = re.fullmatch(r"<code\.tar\.gz: (\d+) bytes, sha256:[0-9a-f]{64}; sent at submit>", value)
            size += int(placeholder.group(1)) if placeholder else len(base64.b64decode(value, validate=True))
        assert size <= 1024 * 1024
        return
    if key == ("v1", "Secret"):
        assert set(obj) <= {"apiVersion", "kind", "metadata", "type", "stringData"}
        assert all(v == "***" for v in obj["stringData"].values())
        return
    validator = crd_validators(obj["apiVersion"].partition("/")[0])[key]
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:10])
