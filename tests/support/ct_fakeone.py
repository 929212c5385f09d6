"""A test plugin: platform ``fakeone`` injects TI-ONE's DDP environment (seed 000).

TI-ONE's ``WORLD_SIZE`` counts *nodes* and ``RANK`` is the *node* index, unlike PyTorch's.
Used to prove ``--emulate`` and ``cloudtrain launch`` auto-detection end to end without the
real ``tione`` plugin.  Registered with ``CLOUDTRAIN_PLUGINS=ct_fakeone`` (tests/support on
``PYTHONPATH``).  Its detector lives in the stdlib-only ``ct_fakeone_detect``, like a real one.
"""
from __future__ import annotations

from typing import Iterator, List

from cloudtrain.hookspecs import hookimpl
from cloudtrain.provider import Artifact, Cluster, JobStatus, Provider, State


class FakeOneProvider(Provider):
    name = "fakeone"
    extra = "fakeone"
    description = "test double of a platform with TI-ONE's node environment"
    detector = "ct_fakeone_detect:detect"
    states = {"SUCCEED": State.SUCCEEDED, "FAILED": State.FAILED, "RUNNING": State.RUNNING}

    def artifacts(self, job, options) -> List[Artifact]:
        return [Artifact("fakeone/CreateTask", job.name,
                         {"Name": job.name, "Envs": [{"Name": k, "Value": v} for k, v in self.rendered_env(job).items()],
                          "StartCmd": "cloudtrain launch " + " ".join(job.launch_args()) + " -- " + job.command_line,
                          "InstanceNum": job.distribution.nodes})]

    def schedule(self, rendered, secrets) -> str:
        raise RuntimeError("fakeone cannot submit; it only emulates an environment")

    def status(self, job_id) -> JobStatus:
        return JobStatus(self.handle(job_id), State.UNKNOWN)

    def logs(self, job_id, follow=False) -> Iterator[str]:
        return iter(())

    def cancel(self, job_id) -> JobStatus:
        return self.status(job_id)

    def list(self) -> List[JobStatus]:
        return []

    @classmethod
    def environment(cls, job, node_index, cluster: Cluster = None):
        cluster = cluster or cls.default_cluster(job)
        nodes = job.distribution.nodes
        gpus = job.resources.gpus_per_node
        return {
            "NODE_LIST": ",".join(f"{h}:{gpus}" for h in cluster.hosts),
            "INDEX": str(node_index),
            "MASTER_ADDR": cluster.hosts[0],
            "MASTER_PORT": str(cluster.master_port),
            "WORLD_SIZE": str(nodes),
            "RANK": str(node_index),
            "GPU_NUM": str(gpus * nodes),
            "GPU_NUM_PER_NODE": str(gpus),
        }


@hookimpl
def cloudtrain_register_providers(register):
    register(FakeOneProvider)
