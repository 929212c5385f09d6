"""The settings of ``modelarts-lite`` (``providers.modelarts-lite``: ``LiteOptions``): the kubernetes
plugin's ``VolcanoOptions`` plus the Lite pool's.  A module of its own, apart from ``options.py``
(which ``modelarts`` loads and which must not load the kubernetes plugin) and from ``lite.py`` (the
provider, which ``render.py`` must not import).

Pydantic models only: no SDK, nothing read from the environment.
"""
from __future__ import annotations

from typing import List, Literal, Optional

from pydantic import Field

from cloudtrain.spec.ports import MasterPort
from cloudtrain_kubernetes.options import VolcanoOptions

from .options import DEFAULT_REGION, NPU_RESOURCE, OPEN_SCRIPT, LiteVolume


class LiteOptions(VolcanoOptions):
    region: str = Field(DEFAULT_REGION, description="Huawei Cloud region of the pool (ranktable routing: "
                                                    "cn-southwest-2 only)")
    project_id: Optional[str] = Field(None, description="the region's project id, for CCE (default: "
                                                        "$HUAWEICLOUD_SDK_PROJECT_ID)")
    cluster_id: Optional[str] = Field(None, description="the pool's CCE cluster id: without `kubeconfig`, a kubeconfig "
                                                        "is fetched with CCE's cluster-certificate call")
    cert_days: int = Field(1, ge=1, le=1827, description="validity of a fetched cluster certificate (days)")
    accelerator: Optional[Literal["ascend", "gpu"]] = Field(None, description="Ascend NPUs (huawei.com/ascend-1980, "
                                                                              "nodes labelled accelerator/huawei-npu: "
                                                                              "ascend-1980) or GPUs (gpu_resource) "
                                                                              "(default: from resources.accelerator, "
                                                                              "Ascend-* -> ascend, any other -> gpu; "
                                                                              "without one: ascend)")
    npu_resource: str = Field(NPU_RESOURCE, description="extended resource that counts NPUs (resources.gpus_per_node "
                                                        "of them)")
    routing: Optional[bool] = Field(None, description="ranktable routing (bootstrap, cabinet annotation); default: on "
                                                      "for ascend")
    open_script_address: Optional[str] = Field(None, description="where bootstrap.sh is (default: the region's "
                                                                 "https://mtest-bucket.obs.<region>.myhuaweicloud.com/acc/rank)")
    hccl_connect_timeout: int = Field(1800, ge=1, description="HCCL_CONNECT_TIMEOUT in seconds (ascend)")
    fault_scheduling: Optional[str] = Field("force", description="the job's fault-scheduling label (null: none)")
    image_python: Optional[str] = Field(None, pattern=r"^\d+\.\d+$", description="the image's Python version, e.g. 3.9 "
                                                                                "(routing needs 3.7 or 3.9)")
    volumes: List[LiteVolume] = Field(default_factory=list, description="extra volumes of every pod")
    emulate_rank_after_acc: Optional[List[int]] = Field(
        None, description="--emulate modelarts-lite only: RANK_AFTER_ACC of pod i (a permutation of 0..nodes-1), "
                          "to rehearse routing's renumbering on this machine")
    master_port: MasterPort = Field(39888, description="torchrun's master port (Huawei's ranktable-routing "
                                                       "guide: a fixed port >= 10000)")
    image_pull_policy: Optional[str] = Field("IfNotPresent", pattern="^(Always|IfNotPresent|Never)$",
                                             description="imagePullPolicy")

    def routed(self) -> bool:
        return self.accelerator == "ascend" and self.routing is not False

    def script_address(self) -> str:
        return self.open_script_address or OPEN_SCRIPT.format(region=self.region)
