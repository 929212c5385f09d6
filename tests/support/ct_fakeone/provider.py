"""The ``fakeone`` provider: renders a request, cannot submit (it exists to be emulated)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List

from cloudtrain.providers.provider import Artifact, JobStatus, Provider, State
from cloudtrain.providers.request import Request


@dataclass(frozen=True)
class FakeOneRequest(Request):
    task: dict

    def artifacts(self) -> List[Artifact]:
        return [Artifact("fakeone/CreateTask", self.task["Name"], self.task)]


class FakeOneProvider(Provider):
    name = "fakeone"
    extra = "fakeone"
    description = "test double of a platform with TI-ONE's node environment"
    platform = "fakeone"
    states = {"SUCCEED": State.SUCCEEDED, "FAILED": State.FAILED, "RUNNING": State.RUNNING}

    def render_request(self, job, options) -> FakeOneRequest:
        return FakeOneRequest({"Name": job.name,
                               "Envs": [{"Name": k, "Value": v} for k, v in self.rendered_env(job).items()],
                               "StartCmd": ("cloudtrain launch " + " ".join(job.launch_args()) + " -- "
                                            + job.command_line),
                               "InstanceNum": job.distribution.nodes})

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
