"""The ``providers.tione`` section of a job file."""
from __future__ import annotations

from typing import Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from cloudtrain.spec.ports import MasterPort


class Framework(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(..., description="FrameworkName of a platform image, e.g. PYTORCH")
    version: Optional[str] = Field(None, description="FrameworkVersion, e.g. 1.9")
    environment: Optional[str] = Field(None, description="FrameworkEnvironment, e.g. torch1.9-py3.8-cuda11.1-gpu")


class DataMount(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    source: str = Field(..., description="cos://BUCKET/PATH, cfs://FS_ID/PATH, cfsturbo://ID/PATH, "
                                         "goosefsx://ID/PATH or dataset://DATASET_ID")
    path: str = Field(..., description="where the data appears in the container, e.g. /opt/ml/input/data")
    read_only: bool = Field(True, description="mount it read-only")


class ClsLog(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    logset_id: str = Field(..., description="CLS logset id")
    topic_id: str = Field(..., description="CLS topic id")


class TioneOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    region: Optional[str] = Field(None, description="Tencent Cloud region, e.g. ap-shanghai (default at submit: "
                                                    "$TENCENTCLOUD_REGION); COS paths need it at render")
    project: Optional[str] = Field(None, description="TI-ONE workspace id (TiProjectId); omit for the default "
                                                     "workspace")
    instance_type: Optional[str] = Field(None, description="postpaid compute spec of every node, e.g. "
                                                           "TI.GN7.8XLARGE128.POST, checked against the catalog when "
                                                           "it lists it (default: resolved from resources.accelerator "
                                                           "x gpus_per_node or resources.instance_type, or for a CPU "
                                                           "job the smallest TI.S spec with resources.cpus_per_node "
                                                           "and memory_gb; cloudtrain resources -p tione lists them)")
    resource_group: Optional[str] = Field(None, description="prepaid resource group (trsg-...): each node gets "
                                                            "resources.cpus_per_node, resources.memory_gb and the "
                                                            "GPUs below, in TI-ONE's units")
    gpu_type: Optional[str] = Field(None, description="resource groups: the GPU type of the nodes (default: "
                                                      "resources.accelerator as TI-ONE names it: A100, V100, T4; the "
                                                      "SDK also names H800, A800, P4); required when the nodes get "
                                                      "GPUs and resources.accelerator does not say which")
    gpus: Optional[float] = Field(None, gt=0, description="resource groups: GPUs per node, fractions allowed (0.5 = "
                                                          "half a card); default: resources.gpus_per_node")
    hcc: Optional[bool] = Field(None, description="the nodes are HCC machines with RDMA NICs (default: the spec's "
                                                  "catalog row, else instance_type contains 'HCC')")
    image: Optional[str] = Field(None, description="image of every node (default: the job's image)")
    image_type: Optional[Literal["TCR", "CCR", "PreSet", "CUSTOM"]] = Field(None, description="registry type "
                                                                                              "(default: TCR for "
                                                                                              "hosts ending in "
                                                                                              ".tencentcloudcr.com, "
                                                                                              "CCR for "
                                                                                              "ccr.ccs.tencentyun.com, "
                                                                                              "else CUSTOM)")
    registry_id: Optional[str] = Field(None, description="TCR: the registry instance id")
    registry_region: Optional[str] = Field(None, description="TCR: the registry's region (default: region)")
    framework: Optional[Framework] = Field(None, description="a platform framework image instead of `image`")
    code_store: Optional[str] = Field(None, description="cos://BUCKETNAME-APPID/PREFIX: at submit cloudtrain uploads "
                                                        "the code with its launcher there (content-addressed: "
                                                        "<PREFIX>/cloudtrain-code/<sha256>.tar.gz, sent once) and the "
                                                        "task's CodePackagePath names it; needs region")
    code_source: Optional[str] = Field(None, description="code already in place, instead of code_store: "
                                                         "cos://BUCKET/PATH/, cfs://FS_ID/PATH, cfsturbo://ID/PATH or "
                                                         "goosefsx://ID/PATH holding the code and cloudtrain's "
                                                         "launcher bundle (.cloudtrain/), mounted at code_dir; or "
                                                         "`image`")
    code_dir: str = Field("/opt/ml/code", description="where the code is mounted (the nodes' working directory)")
    data: List[DataMount] = Field(default_factory=list, description="data mounts (TI-ONE allows 10 data configs with "
                                                                    "code and output)")
    output: Optional[str] = Field(None, description="cos://BUCKET/PATH/ (TI-ONE uploads output_dir there), or cfs:// "
                                                    "/ goosefsx:// mounted at output_dir (the neutral storage.output "
                                                    "says the same)")
    output_dir: str = Field("/opt/ml/model", description="the nodes' CLOUDTRAIN_OUTPUT_DIR")
    python: str = Field("python3", description="the image's Python, which runs `cloudtrain launch`")
    master_port: MasterPort = Field(29500, description="mpi, horovod, ps-worker: the port of cloudtrain's "
                                                       "channel between nodes (TI-ONE gives none in these "
                                                       "modes)")
    training_mode: Optional[str] = Field(None, description="TrainingMode as the platform names it (default from "
                                                           "distribution.type: DDP, MPI, HOROVOD, PS_WORKER, RAY)")
    queue: Optional[str] = Field(None, description="the id of the queue the task waits in (CreateTrainingTask.Queues)")
    vpc_id: Optional[str] = Field(None, description="VpcId")
    subnet_id: Optional[str] = Field(None, description="SubnetId")
    tags: Dict[str, str] = Field(default_factory=dict, description="extra tags of the task")
    cls: Optional[ClsLog] = Field(None, description="also ship the logs to this CLS topic (LogEnable + LogConfig)")
    remark: Optional[str] = Field(None, max_length=1024, description="Remark")
