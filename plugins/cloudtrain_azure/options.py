"""The ``providers.azure`` section of a job: ``AzureOptions`` and its data references."""
from __future__ import annotations

from typing import Dict, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator


class DataRef(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    path: Optional[str] = Field(
        None, description="azureml://, https://, abfss:// or wasbs:// URI (outputs: default location if empty; "
                          "inputs: storage.inputs' URI of the same name if empty)")
    type: Literal["uri_folder", "uri_file"] = Field("uri_folder", description="uri_folder or uri_file")
    mode: Optional[Literal["ro_mount", "rw_mount", "download", "upload", "direct"]] = Field(
        None, description="how the node sees it (Azure ML's default: ro_mount for inputs, rw_mount for outputs)")


class AzureOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    subscription_id: Optional[str] = Field(
        None, description="workspace subscription (with resource_group and workspace; default: config.json)")
    resource_group: Optional[str] = Field(None, description="workspace resource group")
    workspace: Optional[str] = Field(None, description="Azure ML workspace name")
    config_file: Optional[str] = Field(
        None, description="the workspace's config.json (default: searched from the current directory up, like "
                          "MLClient.from_config)")
    compute: Optional[str] = Field(
        None, description="compute cluster name (default: serverless compute sized by resources.instance_type)")
    vm_size: Optional[str] = Field(
        None, description="the VM size: serverless compute's (default: resolved from resources.accelerator x "
                          "gpus_per_node), or the compute cluster's, for the InfiniBand check at render (default: "
                          "read with compute.get at submit)")
    environment: Optional[str] = Field(
        None, description="a registered environment, e.g. azureml:acpt-pytorch-2.2-cuda12.1@latest (default: an "
                          "anonymous one from the job's image)")
    experiment_name: Optional[str] = Field(
        None, description="experiment to file the job under (default: the job's name)")
    inputs: Dict[str, DataRef] = Field(
        default_factory=dict, description="named inputs; a URI alone is short for {path: URI}; the command refers "
                                          "to them as ${{inputs.NAME}}")
    outputs: Dict[str, DataRef] = Field(
        default_factory=dict, description="named outputs; a URI alone is short for {path: URI}; the command refers "
                                          "to them as ${{outputs.NAME}}")
    timeout: Optional[int] = Field(
        None, ge=1, description="cancel the job after this many seconds (limits.timeout)")
    job_tier: Optional[Literal["spot", "basic", "standard", "premium"]] = Field(
        None, description="queue_settings.job_tier (spot: low priority, can be preempted)")
    priority: Optional[Literal["low", "medium", "high"]] = Field(None, description="queue_settings.priority")
    identity: Optional[Literal["user_identity", "managed", "aml_token"]] = Field(
        None, description="identity the job uses for data access (default: Azure ML's)")
    tags: Dict[str, str] = Field(default_factory=dict, description="extra job tags")

    @field_validator("tags", mode="before")
    @classmethod
    def _tag_scalars(cls, value):  # --set providers.azure.tags.attempt=2 gives an int
        if isinstance(value, dict):
            return {k: (str(v).lower() if isinstance(v, bool) else str(v)) if isinstance(v, (bool, int, float)) else v
                    for k, v in value.items()}
        return value

    @field_validator("inputs", "outputs", mode="before")
    @classmethod
    def _uri_alone(cls, value):
        if isinstance(value, dict):
            return {k: {"path": v} if isinstance(v, str) else v for k, v in value.items()}
        return value
