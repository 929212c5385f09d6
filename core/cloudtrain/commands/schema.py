"""The JSON Schema of job.yaml, with every installed provider's options under ``providers``."""
from __future__ import annotations

from ..spec.job import JobSpec


def job_schema(with_providers: bool = True) -> dict:
    schema = JobSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cloudtrain job"
    if with_providers:
        from ..extend.plugins import providers
        props = {}
        for name, info in providers().items():
            sub = info.cls.Options.model_json_schema()
            for key, value in sub.pop("$defs", {}).items():
                schema.setdefault("$defs", {})[key] = value
            sub["description"] = f"options of the {name} provider (plugin {info.plugin}, extra {info.extra})"
            props[name] = sub
        schema["properties"]["providers"] = {
            "type": "object", "description": "each provider's own options",
            "properties": props, "additionalProperties": {"type": "object"}}
    return schema
