"""SageMaker's node environment -> the neutral topology (``cloudtrain launch`` runs this in the node).

Standard library only, Python 3.8 grammar: the launcher bundle ships it inside the code archive.

Where SageMaker says where a node stands, in the order read here:

1. ``$SM_RESOURCE_CONFIG``: the content of ``resourceconfig.json`` as JSON (the SageMaker training
   toolkit exports it; a container whose ``ContainerEntrypoint`` bypasses the toolkit, as
   cloudtrain's does, has no ``SM_*`` variable at all);
2. ``$CLOUDTRAIN_SM_RESOURCECONFIG_JSON``: the same content, where an emulated node gets it
   (``cloudtrain_aws.sagemaker:emulate``: a process on this machine has no /opt/ml);
3. the file itself, ``/opt/ml/input/config/resourceconfig.json`` (every SageMaker training
   container has it, with or without the toolkit; ``$CLOUDTRAIN_SM_RESOURCECONFIG`` names another
   path, for tests);
4. the toolkit's ``SM_HOSTS`` (a JSON list) and ``SM_CURRENT_HOST``.

Node ranks follow the host list sorted lexicographically (``algo-1, algo-10, algo-11, algo-2``),
as SageMaker's own drivers rank them: the SDK's ``scripts/environment.py`` exports
``SM_HOSTS = sorted(hosts)`` and ``SM_CURRENT_HOST_RANK = sorted(hosts).index(current_host)``,
and the training toolkit's ``torch_distributed.py`` uses ``hosts.index(current_host)`` on
resourceconfig.json's ``hosts``, which SageMaker writes "sorted lexicographically"
(``environment.py``); the master is the first of them.  ``SM_CURRENT_HOST_RANK`` (toolkit), else
``CLOUDTRAIN_SM_HOST_RANK`` (emulated nodes sharing one address), wins when it is set.  SageMaker
gives no master port: the SageMaker SDK's drivers use 7777, and so does cloudtrain unless
``SM_MASTER_PORT`` (toolkit) or ``CLOUDTRAIN_SM_MASTER_PORT`` (emulation) says otherwise.  Outputs
go to ``SM_MODEL_DIR`` (toolkit), else ``CLOUDTRAIN_OUTPUT_DIR``, else ``/opt/ml/model`` (uploaded
to S3 as ``model.tar.gz`` when the job ends).

A failed node's launcher writes its one-line reason to ``/opt/ml/output/failure``: "If training
fails, ... your algorithm should write the failure description to this file. In a
DescribeTrainingJob response, SageMaker returns the first 1024 characters from this file as
FailureReason" (SageMaker Developer Guide, your-algorithms-training-algo-output; the SDK's
drivers write it too: container_drivers/common/utils.py ``write_failure_file``).  Not on an
emulated node (this machine's /opt/ml is nobody's failure file); ``$CLOUDTRAIN_SM_FAILURE_FILE``
names another path, for tests.
"""
import json
import os

from cloudtrain.launch.platform import Platform
from cloudtrain.launch.topology import Topology, env_int

RESOURCE_CONFIG = "/opt/ml/input/config/resourceconfig.json"
MASTER_PORT = 7777
MODEL_DIR = "/opt/ml/model"
FAILURE_FILE = "/opt/ml/output/failure"


def _json(text, name):
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError("%s is not valid JSON: %r" % (name, text[:200]))


def resource_config(environ):
    """The node's resourceconfig.json as a dict, or None when this is not a SageMaker node."""
    for name in ("SM_RESOURCE_CONFIG", "CLOUDTRAIN_SM_RESOURCECONFIG_JSON"):
        text = environ.get(name, "").strip()
        if text:
            return _json(text, name)
    path = environ.get("CLOUDTRAIN_SM_RESOURCECONFIG") or RESOURCE_CONFIG
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return _json(f.read(), path)
    return None


def failure_file(environ):
    """Where this node's failure reason goes (see above), or None."""
    if environ.get("CLOUDTRAIN_SM_FAILURE_FILE"):
        return environ["CLOUDTRAIN_SM_FAILURE_FILE"]
    if environ.get("CLOUDTRAIN_SM_RESOURCECONFIG_JSON") or not os.path.isdir(os.path.dirname(FAILURE_FILE)):
        return None
    return FAILURE_FILE


def detect_sagemaker(environ):
    config = resource_config(environ)
    if config is not None:
        hosts = [str(h) for h in config.get("hosts") or []]
        current = str(config.get("current_host", ""))
        iface = config.get("network_interface_name") or environ.get("SM_NETWORK_INTERFACE_NAME")
    elif environ.get("SM_HOSTS") and environ.get("SM_CURRENT_HOST"):
        hosts = [str(h) for h in _json(environ["SM_HOSTS"], "SM_HOSTS")]
        current = environ["SM_CURRENT_HOST"]
        iface = environ.get("SM_NETWORK_INTERFACE_NAME")
    else:
        return None
    if not hosts:
        raise ValueError("SageMaker's resource config lists no hosts")
    hosts = sorted(hosts)
    rank = env_int(environ, "SM_CURRENT_HOST_RANK", "CLOUDTRAIN_SM_HOST_RANK")
    if rank is None:
        if current not in hosts:
            raise ValueError("current host %r is not among SageMaker's hosts %s" % (current, hosts))
        rank = hosts.index(current)
    gpus = env_int(environ, "SM_NUM_GPUS") or env_int(environ, "SM_NUM_NEURONS")
    env = {"NCCL_SOCKET_IFNAME": iface} if iface else {}
    return Topology(
        platform="sagemaker",
        node_rank=rank,
        num_nodes=len(hosts),
        master_addr=environ.get("SM_MASTER_ADDR") or hosts[0],
        master_port=env_int(environ, "SM_MASTER_PORT", "CLOUDTRAIN_SM_MASTER_PORT") or MASTER_PORT,
        hosts=hosts,
        nproc_per_node=gpus or None,
        output_dir=environ.get("SM_MODEL_DIR") or environ.get("CLOUDTRAIN_OUTPUT_DIR") or MODEL_DIR,
        env=env,
        failure_file=failure_file(environ),
    )


# EKS's pods are Kubeflow's: the eks platform is used only when named (its requests name it).
PLATFORMS = (
    Platform("sagemaker", detect_sagemaker, priority=70, environment="cloudtrain_aws.sagemaker:emulate",
             prefixes=("SM_",),
             variables=("TRAINING_JOB_NAME", "CLOUDTRAIN_SM_RESOURCECONFIG", "CLOUDTRAIN_SM_RESOURCECONFIG_JSON",
                        "CLOUDTRAIN_SM_HOST_RANK", "CLOUDTRAIN_SM_MASTER_PORT", "CLOUDTRAIN_SM_FAILURE_FILE")),
    Platform("eks", "cloudtrain_aws.eks_detect:detect", priority=None, environment="cloudtrain_aws.eks_detect:emulate",
             ships=("cloudtrain_kubernetes.detect", "cloudtrain_kubernetes.trainer_detect")),
)
