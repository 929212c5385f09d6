"""``eks``: the ``kubeflow`` provider's manifests on an EKS cluster found by name -- training-operator
v1 jobs, or with ``api: trainer`` the ``kubeflow-trainer`` provider's TrainJob (Kubeflow Trainer v2).

No kubeconfig: the cluster's endpoint and CA come from ``eks.describe_cluster`` and the bearer
token is a presigned STS ``GetCallerIdentity`` URL (what ``aws eks get-token`` makes), signed
with boto3's default credential chain and renewed before it expires.  ``resources.accelerator``
(or ``instance_type``) selects the nodes of one EC2 type from the EC2 catalog
(``node.kubernetes.io/instance-type``); on a type with EFA the pods ask for all its EFA devices
(``vpc.amazonaws.com/efa``, from the EFA device plugin: 4 on p4d, 32 on p5) and get libfabric's
settings, ``FI_EFA_USE_DEVICE_RDMA=1`` only where the device does RDMA read.
"""
from __future__ import annotations

import base64
import os
import tempfile
import time
from dataclasses import replace
from typing import Any, Dict, List, Literal, Optional, Tuple

from pydantic import Field

from cloudtrain.spec.errors import BadInput, PlatformError
from cloudtrain.catalogs.instances import choose
from cloudtrain.spec.job import JobSpec
from cloudtrain.providers.request import CodeUpload
from cloudtrain_kubernetes import manifests as m
from cloudtrain_kubernetes import render
from cloudtrain_kubernetes.options import PodOptions, QueueSchedulerOption, TrainerOptions
from cloudtrain_kubernetes.provider import KubeflowProvider

from .common import aws_credentials, no_region
from .instances import DEVICE_RDMA, EKS_RULES, NCCL_ON_EFA, efa_devices

EFA_RESOURCE = "vpc.amazonaws.com/efa"
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
TOKEN_PREFIX = "k8s-aws-v1."
# AWS's EFA example on EKS requests hugepages-2Mi: 5120Mi beside vpc.amazonaws.com/efa and says
# EFA nodes pre-allocate 5128 2 MiB huge pages (aws-samples/aws-efa-eks README "HugePages",
# examples/simple/nccl-efa-tests.yaml); libfabric's EFA provider registers its buffers there.
EFA_HUGEPAGES = "5120Mi"
TOKEN_TTL = 600  # EKS accepts a token for 15 minutes; renew well before


def hyperpod_nodes(job: JobSpec, options: "EksOptions") -> bool:
    """SageMaker HyperPod nodes: said (``hyperpod``), or an ``ml.*`` instance type named, a name
    only HyperPod's nodes carry as their label (EC2's own nodes are labelled ``p5.48xlarge``)."""
    named = options.instance_type or job.resources.instance_type or ""
    return options.hyperpod or named.startswith("ml.")


def node_label(job: JobSpec, options: "EksOptions", instance_type: str) -> str:
    """The value of ``node.kubernetes.io/instance-type`` on the nodes of ``instance_type``: the
    EC2 name, or on HyperPod the ``ml.`` one (HyperPod's EKS nodes are labelled
    ``node.kubernetes.io/instance-type: ml.p5.48xlarge``: the SageMaker HyperPod CLI's
    HyperPodPytorchJob template selects them so, aws/sagemaker-hyperpod-cli)."""
    if hyperpod_nodes(job, options) and not instance_type.startswith("ml."):
        return "ml." + instance_type
    return instance_type


class EksOptions(QueueSchedulerOption, TrainerOptions, PodOptions):
    api: Literal["kubeflow", "trainer"] = Field("kubeflow", description=(
        "kubeflow: training-operator v1 PyTorchJob / MPIJob / TFJob; trainer: a Kubeflow Trainer v2 TrainJob "
        "(runtime, runtime_kind, replicated_jobs apply)"))
    cluster: Optional[str] = Field(None, description="name of the EKS cluster (required to submit)")
    region: Optional[str] = Field(None, description=(
        "AWS region of the cluster (default: boto3's: AWS_DEFAULT_REGION, the profile's region)"))
    efa_hugepages: Optional[str] = Field(EFA_HUGEPAGES, pattern=r"^[1-9][0-9]*(Mi|Gi)$", description=(
        "hugepages-2Mi each pod asks for beside its EFA devices (libfabric's EFA provider uses 2 MiB huge pages; EFA "
        "nodes pre-allocate 5128 of them); null: none"))
    instance_type: Optional[str] = Field(None, description=(
        "EC2 instance type of the nodes the pods go to (nodeSelector node.kubernetes.io/instance-type; default: "
        "resolved from resources.accelerator, or none); an ml.* name means SageMaker HyperPod nodes"))
    hyperpod: bool = Field(False, description=(
        "the cluster's nodes are a SageMaker HyperPod cluster's, labelled with the ml.* instance type "
        "(node.kubernetes.io/instance-type: ml.p5.48xlarge); the jobs stay Kubeflow/Trainer jobs: HyperPod's own "
        "training operator (HyperPodPyTorchJob) is not rendered"))


def eks_token(session, cluster: str, region: str) -> str:
    """A bearer token for ``cluster``: a presigned STS GetCallerIdentity URL (no request is sent)."""
    from botocore.signers import RequestSigner
    sts = session.client("sts", region_name=region)
    credentials = aws_credentials(session)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4", credentials, session.events)
    url = signer.generate_presigned_url(
        {"method": "GET", "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
         "body": {}, "headers": {"x-k8s-aws-id": cluster}, "context": {}},
        region_name=region, expires_in=60, operation_name="")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class EksProvider(KubeflowProvider[EksOptions]):
    name = "eks"
    extra = "aws"
    description = "Kubeflow PyTorchJob / MPIJob / TFJob or Trainer v2 TrainJob on an EKS cluster found by name"
    sdk_modules = ("boto3", "kubernetes")
    platform = "eks"
    Options = EksOptions
    catalog_refresh = "cloudtrain_aws.catalog_refresh:refresh"
    target_keys = ("cluster", "region")
    kinds = KubeflowProvider.kinds + ("TrainJob",)
    required = {"cluster": "my-cluster", "region": "us-east-1"}

    @classmethod
    def credential_check(cls, options) -> Tuple[bool, str]:
        """AWS's, not a kubeconfig's: the cluster's tokens are signed with boto3's default chain."""
        from .sdk import offline_credentials
        return offline_credentials()

    def __init__(self, session=None, eks=None, **kwargs):
        """``session``: the boto3 ``Session`` whose credentials sign the cluster's tokens (default:
        a new one: boto3's default chain); ``eks``: the EKS client (default: the session's); the
        rest as ``KubernetesProvider`` takes them."""
        super().__init__(**kwargs)
        self._boto_session, self._eks_client = session, eks

    def fallback(self, option: str, job: JobSpec, options: EksOptions) -> bool:
        """``region`` unset: boto3's (AWS_DEFAULT_REGION, the profile's)."""
        return option == "region" and bool(self._session().region_name)

    def manifest_options(self, job: JobSpec, options: EksOptions) -> m.ManifestOptions:
        mopts = super().manifest_options(job, options)
        if options.api == "trainer":  # a TrainJob's name leaves room for its JobSet's pod names
            mopts = replace(mopts, jobset=True)
        choice = choose(job, EKS_RULES, options.instance_type)
        row = choice.row if choice else None
        if choice:  # the nodes of that EC2 type (the label every EKS node carries)
            mopts = replace(mopts, node_selector={INSTANCE_LABEL: node_label(job, options, choice.instance_type),
                                                  **options.node_selector})
        devices = efa_devices(job.network.rdma, row)
        if row is not None and devices and not options.rdma_resource:  # every EFA device of the row's instance
            # NCCL_PROTO=simple as on sagemaker and ec2 (instances.EFA_ENV); the job's env wins (env_list)
            preset = {**m.RDMA_ENV_PRESETS[EFA_RESOURCE], **NCCL_ON_EFA, **(DEVICE_RDMA if row.efa_rdma_read else {})}
            mopts = replace(mopts, rdma_resource=EFA_RESOURCE, rdma_count=devices,
                            rdma_env=options.rdma_env if options.rdma_env is not None else preset)
        elif job.network.rdma == "on" and not options.rdma_resource:
            mopts = replace(mopts, rdma_resource=EFA_RESOURCE)
        if mopts.rdma_resource == EFA_RESOURCE:
            mopts = replace(mopts, hugepages_2mi=options.efa_hugepages)
        return mopts

    @classmethod
    def instance_rules(cls):
        return EKS_RULES

    def check(self, job: JobSpec, options: EksOptions) -> None:
        super().check(job, options)
        if options.api == "trainer":
            render.trainer_check(self, job, options)

    def manifests(self, job: JobSpec, options: EksOptions) -> List[dict]:
        if options.api != "trainer":
            return super().manifests(job, options)
        return render.trainer_objects(self, job, options, self.manifest_options(job, options))

    def code_store_settings(self, options: EksOptions) -> Dict[str, Any]:
        """S3 in the cluster's region (unset: boto3's, when the code is shipped: ``code_store``)."""
        return {**super().code_store_settings(options), "region": options.region}

    def code_store(self, upload: CodeUpload):
        """S3 in the cluster's region (boto3's default chain gives the credentials)."""
        return super().code_store(replace(upload, region=upload.region or self._session().region_name))

    def target(self, options: EksOptions) -> Dict[str, Any]:
        if not options.cluster:
            raise BadInput("providers.eks.cluster is not set; name the EKS cluster to run on "
                           "(aws eks list-clusters shows them)")
        region = options.region or self._session().region_name
        if not region:  # target() is asked only by submit
            raise no_region(self.name, submit=True)
        return {"cluster": options.cluster, "region": region}

    def _session(self):
        boto3 = self.require_sdk("boto3")
        if self._boto_session is None:
            self._boto_session = boto3.session.Session()
        return self._boto_session

    def _eks(self, region: str):
        return self._eks_client or self._session().client("eks", region_name=region)

    def connect(self, target: Dict[str, Any]):
        kubernetes = self.require_sdk("kubernetes")
        from botocore.exceptions import BotoCoreError, ClientError
        cluster, region = target.get("cluster"), target.get("region")
        if not cluster or not region:
            raise BadInput("this eks job's cluster is unknown on this machine; run the command where it was "
                           "submitted (cloudtrain remembers the cluster there), or submit the same job file here: "
                           "submit attaches to the running job")
        session = self._session()
        aws_credentials(session)  # before DescribeCluster, which botocore could not sign
        try:
            info = self._eks(region).describe_cluster(name=cluster)["cluster"]
        except ClientError as exc:
            err = exc.response.get("Error", {})
            fix = ("check providers.eks.cluster and region (aws eks list-clusters)"
                   if err.get("Code") == "ResourceNotFoundException" else "check your AWS credentials and permissions")
            raise PlatformError(f"eks DescribeCluster {cluster} in {region} failed: {err.get('Code')}: "
                                f"{err.get('Message')}; {fix}",
                                request_id=exc.response.get("ResponseMetadata", {}).get("RequestId")) from None
        except BotoCoreError as exc:
            raise PlatformError(f"cannot reach EKS in {region} ({exc}); check the network and region") from None
        if info.get("status") not in (None, "ACTIVE", "UPDATING"):
            raise PlatformError(f"EKS cluster {cluster} is {info.get('status')}; wait until it is ACTIVE")
        cfg = kubernetes.client.Configuration()
        cfg.host = info["endpoint"]
        ca = (info.get("certificateAuthority") or {}).get("data")
        if ca:
            fd, path = tempfile.mkstemp(prefix="cloudtrain-eks-ca-", suffix=".crt")
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(ca))
            cfg.ssl_ca_cert = path
        made = [0.0]

        def refresh(config) -> None:
            if time.monotonic() - made[0] > TOKEN_TTL:
                config.api_key["authorization"] = eks_token(session, cluster, region)
                made[0] = time.monotonic()

        cfg.api_key_prefix = {"authorization": "Bearer"}
        cfg.api_key = {}
        refresh(cfg)  # the client only asks the hook once a key is there
        cfg.refresh_api_key_hook = refresh
        return kubernetes.client.ApiClient(cfg)

    def list_targets(self) -> List[Dict[str, Any]]:
        """The EKS clusters this machine submitted to (``list`` needs a cluster to ask)."""
        return self.store.recalled_targets(self.name, self.target_keys) or []
