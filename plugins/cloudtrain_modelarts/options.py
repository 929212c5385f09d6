"""The settings of ``modelarts`` (``providers.modelarts``: ``ModelartsOptions``) and of
``modelarts-lite``'s extra volumes (``LiteVolume``) and defaults.  ``LiteOptions`` builds on the
kubernetes plugin's ``VolcanoOptions`` and lives in a module of its own (``liteoptions.py``), so
that ``modelarts`` never loads the kubernetes plugin.

Pydantic models only: no SDK, nothing read from the environment.
"""
from __future__ import annotations

from typing import List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cloudtrain.spec.ports import MasterPort

# -- modelarts-lite's defaults (the ranktable-routing guide's manifest) ------------------------------
ASCEND = "ascend-1980"
NPU_RESOURCE = "huawei.com/" + ASCEND
DEFAULT_REGION = "cn-southwest-2"  # Guiyang-1: the only region with ranktable routing (the guide's)
OPEN_SCRIPT = "https://mtest-bucket.obs.{region}.myhuaweicloud.com/acc/rank"


class ObsData(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(..., pattern=r"^[A-Za-z0-9_-]{1,64}$", description="the input's or output's name (also its env "
                                                                         "var / parameter)")
    obs_url: str = Field(..., description="OBS directory, e.g. obs://bucket/data/ (or /bucket/data/)")
    local_dir: Optional[str] = Field(None, description="where it appears in the container (default: ModelArts chooses)")
    access_method: Literal["parameter", "env"] = Field(
        "parameter", description="how the script learns the local path: a --<name> argument or an environment variable")


class ModelartsOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    region: Optional[str] = Field(None, description="Huawei Cloud region, e.g. cn-north-4 (default: "
                                                    "$HUAWEICLOUD_SDK_REGION)")
    project_id: Optional[str] = Field(None, description="the region's project id (default: "
                                                        "$HUAWEICLOUD_SDK_PROJECT_ID, else asked from IAM)")
    workspace_id: Optional[str] = Field(None, description="ModelArts workspace (default: the default workspace, \"0\")")
    code_store: Optional[str] = Field(
        None, description="obs://bucket/prefix: submit uploads the code with the launcher there (content-addressed: "
                          "<prefix>/cloudtrain-code/<sha256>/code/code.tar.gz, once); this or code_dir is required to "
                          "submit")
    code_dir: Optional[str] = Field(
        None, description="instead of code_store: an OBS directory holding code staged by hand (the code with the "
                          "launcher "
                          "bundle in .cloudtrain/, as cloudtrain stage writes it)")
    image: Optional[str] = Field(None, description="custom image from SWR (default: the job's image)")
    flavor_id: Optional[str] = Field(None, description="resource flavor (default on a dedicated pool: "
                                                       "modelarts.pool.visual.<n>xlarge from "
                                                        "gpus_per_node; else the public flavor resolved from "
                                                        "resources.accelerator x "
                                                        "gpus_per_node; for a job with no accelerator, the "
                                                        "region's smallest CPU training flavor with cpus_per_node and "
                                                        "memory_gb, chosen at submit; checked against the catalog "
                                                        "when it lists it)")
    pool_id: Optional[str] = Field(None, description="dedicated resource pool id")
    inputs: List[ObsData] = Field(default_factory=list, description="OBS data the job reads")
    outputs: List[ObsData] = Field(default_factory=list, description="OBS directories the job writes (uploaded by "
                                                                     "ModelArts)")
    log_export_path: Optional[str] = Field(None, description="OBS directory for the job's logs")
    priority: Optional[int] = Field(None, ge=1, le=3, description="scheduling priority on a dedicated pool (1-3, 3 "
                                                                  "highest)")
    master_port: MasterPort = Field(29500, description="torchrun's master port (ModelArts gives none)")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    image_runs_as_root: bool = Field(
        False, description="mpi/horovod on several nodes: the image runs as root, so each node can start its sshd for "
                           "node 0's mpirun (ModelArts runs custom images as ma-user, uid 1000, unless the image and "
                           "pool allow root); without it such a job is refused")
    secrets_in_environment: bool = Field(
        False, description="send the job's secrets as plain training-job environment variables (visible to anyone "
                           "who can read the job); without it a job with secrets is refused")
    description: Optional[str] = Field(None, max_length=180, description="free text shown with the job (the spec hash "
                                                                         "is appended)")

    @field_validator("code_dir", "log_export_path")
    @classmethod
    def _obs_path(cls, v):
        if v is not None and not (v.startswith("obs://") or v.startswith("/")):
            raise ValueError(f"{v!r} is not an OBS path; use obs://bucket/dir/ or /bucket/dir/")
        return v

    @field_validator("code_store")
    @classmethod
    def _obs_url(cls, v):
        if v is not None and (not v.startswith("obs://") or not v[len("obs://"):].split("/")[0]):
            raise ValueError(f"{v!r} is not an obs://BUCKET/PREFIX URL; use e.g. obs://my-bucket/cloudtrain/")
        return v


class LiteVolume(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(..., pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", description="volume name")
    mount_path: str = Field(..., description="where it is mounted in the container")
    pvc: Optional[str] = Field(None, description="a PersistentVolumeClaim (SFS, SFS Turbo, OBS): shared between pods")
    nfs: Optional[str] = Field(None, description="an NFS export, server:/path: shared between pods")
    host_path: Optional[str] = Field(None, description="a path on the node")
    read_only: bool = Field(False, description="mount read-only")
    shared: Optional[bool] = Field(None, description="do several pods see the same files (default: yes for pvc/nfs, no "
                                                     "for host_path)")

    @model_validator(mode="after")
    def _one_source(self) -> "LiteVolume":
        if sum(x is not None for x in (self.pvc, self.nfs, self.host_path)) != 1:
            raise ValueError("give exactly one of pvc, nfs or host_path")
        if self.nfs is not None and ":" not in self.nfs:
            raise ValueError(f"nfs {self.nfs!r} must be server:/path")
        return self

    @property
    def is_shared(self) -> bool:
        return self.shared if self.shared is not None else self.host_path is None

    def volume(self) -> dict:
        if self.pvc:
            return {"name": self.name, "persistentVolumeClaim": {"claimName": self.pvc, "readOnly": self.read_only}}
        if self.nfs:
            server, _, path = self.nfs.partition(":")
            return {"name": self.name, "nfs": {"server": server, "path": path, "readOnly": self.read_only}}
        return {"name": self.name, "hostPath": {"path": self.host_path}}
