"""``modelarts-lite``: a Volcano Job with ranktable routing on a ModelArts Lite (CCE) pool.

The manifest starts from the kubernetes plugin's pure builder
(``cloudtrain_kubernetes.manifests.build_volcano``) and reproduces the manifest of Huawei's guide
"Using ranktable routing to train PyTorch on NPUs in a Lite Cluster resource pool" (the
ranktable-routing guide below) by post-processing its objects here:

- one task ``worker`` with every node (routing renumbers the pods of one task; the master is
  ``<job>-worker-<MA_MASTER_INDEX>.<job>``), pod anti-affinity on ``volcano.sh/job-name`` per
  ``kubernetes.io/hostname``;
- Ascend: label ``ring-controller.cce: ascend-1980`` on the job and its pods, pod annotation
  ``cabinet: "cabinet"`` (tor-topology routing), Volcano plugins ``configmap1980
  --rank-table-version=v2`` / ``env`` / ``svc --publish-not-ready-addresses=true``, resources
  ``huawei.com/ascend-1980``, node selector ``accelerator/huawei-npu: ascend-1980``, the Ascend
  driver, add-ons, hccn.conf, npu-smi and localtime host paths, ``HCCL_CONNECT_TIMEOUT``;
- job label ``fault-scheduling: force``, policies ``PodEvicted -> RestartJob`` (and
  ``PodFailed`` -> RestartJob with ``max_restarts``, else AbortJob), ``maxRetry`` >= 1;
- ``MA_*`` env from the downward API (``MA_VJ_NAME``, ``MA_TASK_NAME``, ``MA_CURRENT_HOST_IP``,
  ``NAME``) and ``MA_NUM_HOSTS``/``MA_NUM_GPUS``;
- the start line: the routing bootstrap (``${OPEN_SCRIPT_ADDRESS}/bootstrap.sh``), then
  ``RANK_AFTER_ACC`` (``/tmp/RANK_AFTER_ACC`` or ``VC_TASK_INDEX``) and ``MA_MASTER_INDEX``
  (``/tmp/MASTER_INDEX`` or 0) exactly as the guide exports them, then ``exec`` of
  ``cloudtrain launch --platform modelarts-lite``, whose detector makes the node rank follow
  ``RANK_AFTER_ACC`` and the master follow ``MA_MASTER_INDEX``.

Submitted through the kubernetes plugin's lifecycle (``KubernetesProvider``) to the pool's CCE
cluster: a kubeconfig from the options, or one fetched with CCE's cluster-certificate call.

This module is the provider (``ModelartsLiteProvider``, a ``VolcanoProvider``); its settings are
``liteoptions.LiteOptions`` (which extend the kubernetes plugin's ``VolcanoOptions``), the
manifest's pure builders ``render.py``'s (``build_lite``), the extra volumes ``options.LiteVolume``.
Both settings and provider build on the kubernetes plugin, so they stay out of ``options.py`` and
``provider.py``: ``modelarts`` never loads it.
"""
from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from cloudtrain.spec.accelerators import is_npu
from cloudtrain.spec.errors import BadInput, CloudtrainWarning, JobFileError, PlatformError
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.provider import Cluster
from cloudtrain_kubernetes import manifests as m
from cloudtrain_kubernetes.provider import VolcanoProvider

from . import lint, render, sdk
from .detect import LITE, lite_environment
from .liteoptions import LiteOptions
from .render import CABINET, NPU_SELECTOR

ROUTING_PYTHONS = ("3.7", "3.9")
MIN_ROUTED_NODES = 3
TYPES = ("ddp", "deepspeed", "none")


class ModelartsLiteProvider(VolcanoProvider[LiteOptions]):
    name = LITE
    extra = "modelarts"
    description = "ModelArts Lite pool (CCE + Volcano): Ascend/GPU jobs with ranktable routing"
    sdk_modules = ("kubernetes", "huaweicloudsdkcce")
    Options = LiteOptions
    platform = LITE

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """The kubeconfig option's file when one is given, else the Huawei Cloud keys that fetch the
        pool's kubeconfig from CCE (``sdk.offline_credentials``)."""
        kubeconfig = getattr(options, "kubeconfig", None)
        if kubeconfig:
            return super().credential_check(options)
        from .sdk import offline_credentials
        return offline_credentials()

    def __init__(self, cce=None, **kwargs):
        """``cce``: the CCE client that issues the pool's cluster certificate (default: one for the
        option's region, with the environment's credentials); the rest as ``KubernetesProvider``
        takes them."""
        super().__init__(**kwargs)
        self._cce = cce

    @classmethod
    def options(cls, job: JobSpec) -> LiteOptions:
        """The options with ``accelerator`` resolved from ``resources.accelerator`` when not set."""
        options = super().options(job)
        wanted = job.resources.accelerator
        kind = ("ascend" if is_npu(wanted) else "gpu") if wanted else None
        if options.accelerator and kind and options.accelerator != kind:
            raise cls.job_error(job, ("providers", cls.name, "accelerator"),
                                f"is {options.accelerator}, but resources.accelerator is {wanted}; make them agree "
                                "(or drop this option: it follows resources.accelerator)")
        return options.model_copy(update={"accelerator": options.accelerator or kind or "ascend"})

    def gpu_selection(self, job: JobSpec, options: LiteOptions):
        # Ascend nodes are chosen by the routing guide's nodeSelector accelerator/huawei-npu: ascend-1980
        return None if options.accelerator == "ascend" else super().gpu_selection(job, options)

    def manifest_options(self, job: JobSpec, options: LiteOptions) -> m.ManifestOptions:
        mopts = super().manifest_options(job, options)
        ascend = options.accelerator == "ascend"
        plugins = {"svc": ["--publish-not-ready-addresses=true"], "env": []}
        if ascend:
            plugins["configmap1980"] = ["--rank-table-version=v2"]
        plugins.update({k: list(v) for k, v in options.plugins.items()})
        annotations = {**(CABINET if options.routed() else {}), **options.pod_annotations}
        # Ascend nodes reach each other over RoCE through the NPUs' own ports, configured by the
        # mounted /etc/hccn.conf: the routing guide's manifest asks for the NPUs only, no RDMA device.
        return replace(mopts, volcano_plugins=plugins, pod_annotations=annotations, rdma_device=not ascend,
                       gpu_resource=options.npu_resource if ascend else options.gpu_resource,
                       node_selector={**(NPU_SELECTOR if ascend else {}), **mopts.node_selector})

    def say_what_ascend_does(self, job: JobSpec, options: LiteOptions) -> None:
        """What an Ascend pool does with the fields it has no place for, said rather than dropped
        (issue 28 item 5): the routing guide's manifest names no chip and no RDMA device."""
        if job.resources.accelerator:
            warnings.warn(f"resources.accelerator is {job.resources.accelerator}: the pods ask for "
                          f"{options.npu_resource} "
                          "NPUs on nodes labelled accelerator/huawei-npu: ascend-1980 (the ranktable-routing guide), "
                          "whichever Ascend chip the pool has: the chip is the pool's, which cloudtrain cannot see "
                          "offline", CloudtrainWarning, stacklevel=3)
        if job.network.rdma != "auto":
            warnings.warn(f"network.rdma is {job.network.rdma}: Ascend nodes reach each other over RoCE through the "
                          "NPUs' own ports (the mounted /etc/hccn.conf), whatever the job asks; there is no RDMA "
                          "device "
                          "to request or leave out", CloudtrainWarning, stacklevel=3)

    def check(self, job: JobSpec, options: LiteOptions) -> None:
        super().check(job, options)
        d = job.distribution
        if d.type not in TYPES:
            raise self.job_error(job, ("distribution", "type"), f"modelarts-lite runs torchrun on every pod "
                                 f"({', '.join(TYPES)}), not {d.type}; use the volcano provider for other types")
        if options.accelerator == "ascend" and options.rdma_resource:
            raise self.job_error(job, ("providers", self.name, "rdma_resource"),
                                 f"Ascend nodes get RoCE through the mounted /etc/hccn.conf, not an RDMA device plugin "
                                 f"({options.rdma_resource} would keep the pods Pending); drop rdma_resource")
        if options.accelerator == "ascend":
            self.say_what_ascend_does(job, options)
        if options.accelerator == "gpu" and options.routing:
            raise self.job_error(job, ("providers", self.name, "routing"),
                                 "ranktable routing is for Ascend NPUs; drop `routing` or set accelerator: ascend")
        permutation = options.emulate_rank_after_acc
        if permutation is not None and sorted(permutation) != list(range(d.nodes)):
            raise self.job_error(job, ("providers", self.name, "emulate_rank_after_acc"),
                                 f"must be a permutation of 0..{d.nodes - 1} (one new rank per pod), got "
                                 f"{options.emulate_rank_after_acc}")
        if not options.routed():
            return
        # The ranktable-routing guide's constraints.
        workdir = options.workdir
        for volume in options.volumes:
            if workdir and volume.is_shared and lint.under(workdir, volume.mount_path):
                raise self.job_error(job, ("providers", self.name, "workdir"),
                                     f"{workdir} is on the shared volume {volume.name} ({volume.mount_path}); "
                                     f"ranktable "
                                     "routing fails when the script runs in a shared directory: use a directory of the "
                                     "image (or a host_path) as workdir and read data from the volume")
        if d.min_nodes is not None and d.min_nodes < d.nodes:
            raise self.job_error(job, ("distribution", "min_nodes"),
                                 "ranktable routing needs fixed node ranks (RANK_AFTER_ACC), but a node range makes "
                                 "torchrun rank nodes in rendezvous order; drop min_nodes or set "
                                 f"providers.{self.name}.routing: false")
        spawn = lint.find_spawn(job)
        if spawn:
            path, lineno, call = spawn
            raise JobFileError(f"calls {call}(): ranktable routing needs every process started by torchrun "
                               "(torch.distributed.run), which `cloudtrain launch` already does with procs_per_node "
                               "processes per node; remove the spawn and read RANK/LOCAL_RANK/WORLD_SIZE from the "
                               "environment", file=str(path), line=lineno)
        # Below 3 nodes routing skips itself and the job runs as Volcano numbered it: harmless, so
        # said only to whoever asked for routing by name (routing: true), not on every small render.
        if d.nodes < MIN_ROUTED_NODES and options.routing is True:
            warnings.warn(f"ranktable routing is skipped below {MIN_ROUTED_NODES} nodes (this job has {d.nodes}); "
                          "the job runs with Volcano's pod order", CloudtrainWarning)
        if options.image_python and options.image_python not in ROUTING_PYTHONS:
            warnings.warn(f"ranktable routing needs Python 3.7 or 3.9 in the image (image_python: "
                          f"{options.image_python}); the job runs but routing will not accelerate it",
                          CloudtrainWarning)

    def manifests(self, job: JobSpec, options: LiteOptions) -> List[dict]:
        return render.build_lite(job, options, self.manifest_options(job, options), self.detectors_variable())

    # OBS (the pool's own object store), or any S3-compatible one with code_store_endpoint
    code_store_schemes = ("obs", "s3")

    def code_store_settings(self, options: LiteOptions) -> Dict[str, Any]:
        return {**super().code_store_settings(options), "region": options.region}

    # -- reaching the pool's cluster ---------------------------------------------------------------
    def target(self, options: LiteOptions) -> Dict[str, Any]:
        target = super().target(options)
        if options.cluster_id and not options.kubeconfig:
            target.update(region=options.region, cluster_id=options.cluster_id, project_id=options.project_id,
                          cert_days=options.cert_days)
        return target

    target_keys = ("kubeconfig", "context", "region", "cluster_id", "project_id")

    def connect(self, target: Dict[str, Any]):
        """The kubeconfig's cluster, or (``cluster_id`` without ``kubeconfig``) the pool's CCE cluster
        through a client certificate that CCE issues now; it is kept in memory, never written."""
        if not (target.get("cluster_id") and not target.get("kubeconfig")):
            return super().connect(target)
        self.require_sdk("kubernetes")
        from kubernetes import config
        kubeconfig = self.cce_kubeconfig(target)
        try:
            return config.new_client_from_config_dict(kubeconfig, context=target.get("context"))
        except config.ConfigException as exc:
            raise PlatformError(f"CCE's kubeconfig for cluster {target['cluster_id']} is not usable ({exc}); "
                                "set providers.modelarts-lite.context (internal or external)") from None

    def cce_client(self, region: str, project_id: Optional[str]):
        return self._cce if self._cce is not None else sdk.cce_client(self.name, region, project_id)

    def cce_kubeconfig(self, target: Dict[str, Any]) -> dict:
        """A kubeconfig (with a client certificate valid ``cert_days``) from CCE; kept in memory only."""
        from huaweicloudsdkcce.v3 import ClusterCertDuration, CreateKubernetesClusterCertRequest
        client = self.cce_client(sdk.region_of(target.get("region")), target.get("project_id"))
        duration = ClusterCertDuration(duration=int(target.get("cert_days") or 1))
        request = CreateKubernetesClusterCertRequest(cluster_id=target["cluster_id"], body=duration)
        with sdk.api_errors("CCE", f"create_kubernetes_cluster_cert of cluster {target['cluster_id']}"):
            response = client.create_kubernetes_cluster_cert(request)
        config = sdk.from_model(response)
        config.pop("Port-ID", None)
        if not config.get("clusters") or not config.get("users"):
            raise PlatformError(f"CCE returned no kubeconfig for cluster {target['cluster_id']}; check the cluster id")
        return config


def emulate(job: JobSpec, node_index: int, cluster: Cluster) -> Dict[str, str]:
    """A Lite pod's variables once its start line ran (routing emulated by ``emulate_rank_after_acc``)."""
    options = ModelartsLiteProvider.options(job)
    mopts = m.ManifestOptions(name=options.name)
    try:
        return lite_environment(m.object_name(job, mopts), job.distribution.nodes, node_index, list(cluster.hosts),
                                cluster.master_port, job.resources.gpus_per_node, options.emulate_rank_after_acc)
    except ValueError as exc:
        raise BadInput(f"providers.{LITE}.emulate_rank_after_acc: {exc}") from None
