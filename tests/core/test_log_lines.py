"""``Run.logs`` and ``Provider.logs`` (and ``cloudtrain logs``) give the same lines: one per item,
each ending with one "\\n", whatever chunks the provider's platform returns."""
from __future__ import annotations

from typing import Iterator

from conftest import run_cli, write_job

import cloudtrain
from cloudtrain.extend.plugins import get_provider_class
from cloudtrain.providers.provider import log_lines


def test_chunks_become_lines_each_ending_with_one_newline():
    chunks = ["a\r\n", "b", "c\nd\n", "", "tqdm 10%\rtqdm 20%\n"]
    assert list(log_lines(chunks)) == ["a\n", "b\n", "c\n", "d\n", "\n", "tqdm 10%\rtqdm 20%\n"]


def test_a_providers_own_logs_are_handed_out_as_lines():
    """A plugin that yields lines without their ending (as the Kubernetes API's do) or several
    lines in one chunk is seen through the base's lines."""
    base = get_provider_class("local")

    class Chunky(base):
        def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
            yield "[node0] one"
            yield "[node0] two\n[node1] three\r\n"

    class Subclass(Chunky):
        def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
            yield from super().logs(job_id, follow)
            yield "[node1] four"

    assert list(Chunky().logs("x")) == ["[node0] one\n", "[node0] two\n", "[node1] three\n"]
    assert list(Subclass().logs("x")) == ["[node0] one\n", "[node0] two\n", "[node1] three\n", "[node1] four\n"]


def test_run_logs_and_provider_logs_yield_the_same_lines_for_a_local_job(tmp_path, home):
    (tmp_path / "t.py").write_text("print('first'); print('second', flush=True)\n")
    job = write_job(tmp_path, "name: lines\ncode: .\ncommand: python t.py\ndistribution: {type: none, nodes: 1}\n")
    run = cloudtrain.submit(str(job), provider="local")
    assert run.wait(timeout=120).state is cloudtrain.State.SUCCEEDED
    lines = list(run.logs())
    assert lines == list(run.provider.logs(run.id)) == list(run.logs(follow=True))
    assert lines == list(cloudtrain.attach(run.handle).logs())
    assert "[node0/rank0] first\n" in lines and "[node0/rank0] second\n" in lines
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    assert run_cli("logs", run.handle, check=0).stdout == "".join(lines) == str(run.logs())  # print(run.logs())
