"""What a ModelArts node sees, both ways: ``detect_*`` (in the node) and ``*_environment``
(the inverse, used to emulate ModelArts on this machine).

Standard library only, Python >= 3.7 grammar: shipped into the node with the launcher.

ModelArts Standard (training jobs; platforms.md 3.3): ``MA_NUM_HOSTS`` (instance count),
``VC_TASK_INDEX`` (this container's index from 0), ``VC_WORKER_HOSTS`` (comma-separated node DNS
names; the master is the first), ``VC_WORKER_NUM``, ``MA_NUM_GPUS`` (cards in this container),
``MA_TASK_NAME`` (``worker``), ``MA_CURRENT_IP``.  ModelArts gives no master port: cloudtrain's
request sets ``CLOUDTRAIN_MASTER_PORT``.

ModelArts Lite (a Volcano Job on the pool's CCE cluster, as Huawei's ranktable-routing guide runs it): the ``svc``/``env`` Volcano
plugins inject ``VC_TASK_INDEX``, ``VC_<TASK>_HOSTS`` and ``VC_<TASK>_NUM``; the manifest sets
``MA_NUM_HOSTS``, ``MA_NUM_GPUS``, ``MA_VJ_NAME``/``MA_TASK_NAME`` (downward API) and
``CLOUDTRAIN_MASTER_PORT``; the container's start line runs the routing bootstrap and exports
``RANK_AFTER_ACC`` (``/tmp/RANK_AFTER_ACC`` if routing wrote it, else ``VC_TASK_INDEX``) and
``MA_MASTER_INDEX`` (``/tmp/MASTER_INDEX``, else 0).  Ranktable routing *renumbers* nodes:
the node rank is ``RANK_AFTER_ACC`` and the master is the pod ``MA_MASTER_INDEX`` of the task,
``<job>-<task>-<index>.<job>`` (``VC_<TASK>_HOSTS[MA_MASTER_INDEX]``).  After renumbering one
node cannot know every other node's rank, so the host list is left empty (torchrun needs only
the master); without renumbering it is ``VC_<TASK>_HOSTS``.
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from cloudtrain.launch.platform import Platform
from cloudtrain.launch.topology import DEFAULT_MASTER_PORT, Topology, env_int, split_hosts

LITE = "modelarts-lite"
STANDARD = "modelarts"
# Set by the Lite start line when routing wrote /tmp/RANK_AFTER_ACC (ranks were renumbered).
ROUTED = "CLOUDTRAIN_RANK_ROUTED"
TASK = "worker"
MA_HOME = "/home/ma-user"
MA_JOB_DIR = MA_HOME + "/modelarts/user-job-dir"


def task_env(task: str) -> str:
    """``VC_<TASK>_HOSTS``'s ``<TASK>``: upper case, ``-`` (anything else) -> ``_``."""
    return re.sub(r"[^A-Za-z0-9]", "_", task).upper()


def _port(environ: Mapping[str, str]) -> int:
    return env_int(environ, "CLOUDTRAIN_MASTER_PORT", "MASTER_PORT") or DEFAULT_MASTER_PORT


def _gpus(environ: Mapping[str, str]) -> Optional[int]:
    return env_int(environ, "MA_NUM_GPUS") or None  # 0 (a CPU flavor) says nothing


def _task_hosts(environ: Mapping[str, str], what: str) -> Tuple[str, List[str], int]:
    """The Volcano task's name, its ``VC_<TASK>_HOSTS`` and the node count, which must agree."""
    task = environ.get("MA_TASK_NAME") or TASK
    hosts = split_hosts(environ.get("VC_%s_HOSTS" % task_env(task), ""))
    nodes = env_int(environ, "MA_NUM_HOSTS", "VC_%s_NUM" % task_env(task)) or len(hosts) or 1
    if hosts and len(hosts) != nodes:
        raise ValueError("MA_NUM_HOSTS=%d but VC_%s_HOSTS lists %d %s" % (nodes, task_env(task), len(hosts), what))
    return task, hosts, nodes


# -- ModelArts Standard -------------------------------------------------------------------------
def detect_standard(environ: Mapping[str, str]) -> Optional[Topology]:
    if "MA_NUM_HOSTS" not in environ or "VC_TASK_INDEX" not in environ or "RANK_AFTER_ACC" in environ:
        return None
    task, hosts, nodes = _task_hosts(environ, "hosts")
    if not hosts and nodes > 1:
        raise ValueError("ModelArts set MA_NUM_HOSTS=%d but no VC_%s_HOSTS; cannot find the master"
                         % (nodes, task_env(task)))
    master = hosts[0] if hosts else (environ.get("MA_CURRENT_IP") or "127.0.0.1")
    return Topology(platform=STANDARD, node_rank=env_int(environ, "VC_TASK_INDEX") or 0, num_nodes=nodes,
                    master_addr=master, master_port=_port(environ), hosts=hosts or [master],
                    nproc_per_node=_gpus(environ))


def standard_environment(nodes: int, node_index: int, hosts: Sequence[str], master_port: int,
                         gpus_per_node: int) -> Dict[str, str]:
    """The variables ModelArts Standard injects into node ``node_index`` (plus the master port
    cloudtrain's request sets)."""
    return {
        "MA_NUM_HOSTS": str(nodes),
        "MA_NUM_GPUS": str(gpus_per_node),
        "MA_TASK_NAME": TASK,
        "MA_CURRENT_IP": hosts[node_index],
        "VC_TASK_INDEX": str(node_index),
        "VC_WORKER_NUM": str(nodes),
        "VC_WORKER_HOSTS": ",".join(hosts),
        "MA_HOME": MA_HOME,
        "MA_JOB_DIR": MA_JOB_DIR,
        "MA_MOUNT_PATH": MA_HOME + "/modelarts",
        "MA_LOG_DIR": MA_HOME + "/modelarts/log",
        "CLOUDTRAIN_MASTER_PORT": str(master_port),
    }


# -- ModelArts Lite (Volcano, ranktable routing) -----------------------------------------------
def detect_lite(environ: Mapping[str, str]) -> Optional[Topology]:
    if "RANK_AFTER_ACC" not in environ or "VC_TASK_INDEX" not in environ:
        return None
    task, pods, nodes = _task_hosts(environ, "pods")
    index = env_int(environ, "VC_TASK_INDEX") or 0
    rank = env_int(environ, "RANK_AFTER_ACC")
    rank = index if rank is None else rank
    master_index = env_int(environ, "MA_MASTER_INDEX") or 0
    if not 0 <= master_index < nodes:
        raise ValueError("MA_MASTER_INDEX=%d is outside 0..%d" % (master_index, nodes - 1))
    job = environ.get("MA_VJ_NAME")
    if pods:
        master = pods[master_index]
    elif job:  # the svc plugin's naming, as the launch script of Huawei's ranktable-routing guide builds it
        master = "%s-%s-%d.%s" % (job, task, master_index, job)
    elif nodes == 1:
        master = "127.0.0.1"
    else:
        raise ValueError("no VC_%s_HOSTS and no MA_VJ_NAME: cannot find the master pod" % task_env(task))
    routed = environ.get(ROUTED) == "1" or rank != index or master_index != 0
    hosts = [master] if nodes == 1 else ([] if routed else pods)
    return Topology(platform=LITE, node_rank=rank, num_nodes=nodes, master_addr=master,
                    master_port=_port(environ), hosts=hosts, nproc_per_node=_gpus(environ))


def lite_environment(job_name: str, nodes: int, node_index: int, hosts: Sequence[str], master_port: int,
                     gpus_per_node: int, rank_after_acc: Optional[Sequence[int]] = None) -> Dict[str, str]:
    """What the pod ``node_index`` (its ``VC_TASK_INDEX``) of a Lite job sees once its start line
    ran.  ``rank_after_acc`` (a permutation of the pod indexes) emulates routing's renumbering:
    pod ``i`` gets ``RANK_AFTER_ACC = rank_after_acc[i]`` and every pod ``MA_MASTER_INDEX`` = the
    pod whose new rank is 0."""
    order: List[int] = list(rank_after_acc) if rank_after_acc is not None else list(range(nodes))
    if sorted(order) != list(range(nodes)):
        raise ValueError("rank_after_acc must be a permutation of 0..%d, got %r" % (nodes - 1, order))
    env = {
        "MA_NUM_HOSTS": str(nodes),
        "MA_NUM_GPUS": str(gpus_per_node),
        "MA_VJ_NAME": job_name,
        "MA_TASK_NAME": TASK,
        "NAME": "%s-%s-%d" % (job_name, TASK, node_index),
        "MA_CURRENT_HOST_IP": hosts[node_index],
        "VC_TASK_INDEX": str(node_index),
        "VK_TASK_INDEX": str(node_index),
        "VC_%s_HOSTS" % task_env(TASK): ",".join(hosts),
        "VC_%s_NUM" % task_env(TASK): str(nodes),
        "RANK_AFTER_ACC": str(order[node_index]),
        "MA_MASTER_INDEX": str(order.index(0)),
        "CLOUDTRAIN_MASTER_PORT": str(master_port),
    }
    if order != list(range(nodes)):
        env[ROUTED] = "1"
    return env


def emulate_standard(job, node_index: int, cluster) -> Dict[str, str]:
    return standard_environment(job.distribution.nodes, node_index, cluster.hosts, cluster.master_port,
                                job.resources.gpus_per_node)


# Both run on Volcano (their pods have VC_* variables too): Lite (RANK_AFTER_ACC) first, then
# Standard (MA_NUM_HOSTS), both before the volcano platform.
PLATFORMS = (
    Platform(LITE, detect_lite, priority=60, environment="cloudtrain_modelarts.lite:emulate",
             variables=("RANK_AFTER_ACC", "MA_MASTER_INDEX", ROUTED)),
    Platform(STANDARD, detect_standard, priority=50, environment=emulate_standard, prefixes=("MA_",)),
)
