"""``cloudtrain logs --node --rank --since --tail`` (issue 43): what is picked out of a log, the
time index the supervisors keep beside a local or Docker job's log, and a failed job's first
failing rank, found in the launchers' own report of it."""
import pytest

from cloudtrain.commands.logscmd import first_failure
from cloudtrain.runtime.logselect import LogSelection, TimeIndex, from_file, matches, origin, select

LOG = ["[node0/rank0] epoch 1\n", "[node0/rank1] epoch 1 rank 1\n", "[node1/rank2] hello from 2\n",
       "[node1] cloudtrain launch: starting torchrun\n", "[cloudtrain] job failed: node 1 rank 2\n",
       "[algo-2] sagemaker host 2\n", "no prefix at all\n"]


def test_a_lines_origin_is_its_prefix():
    assert origin(LOG[1]) == (0, 1) and origin(LOG[3]) == (1, None)
    assert origin(LOG[5]) == (1, None)  # SageMaker's second host is node 1
    assert origin(LOG[6]) == (None, None) and origin("[node1/rankX] x") == (None, None)


def test_node_and_rank_filters_keep_the_jobs_own_notes():
    assert list(select(LOG, LogSelection(node=1))) == [LOG[2], LOG[3], LOG[4], LOG[5]]
    assert list(select(LOG, LogSelection(rank=1))) == [LOG[1], LOG[4]]
    assert list(select(LOG, LogSelection(node=0, rank=2))) == [LOG[4]]
    assert list(select(LOG, LogSelection(tail=2))) == LOG[-2:]
    assert list(select(LOG, LogSelection(tail=0))) == [] and list(select(LOG, LogSelection())) == LOG
    assert not matches("[node10/rank1] x\n", LogSelection(node=1))  # node 10 is not node 1


def _write_log(tmp_path, clock):
    """A log written as a supervisor writes it: 100 lines, one every half second."""
    log = tmp_path / "job.log"
    index = TimeIndex(tmp_path / "job.times", 0, clock=lambda: clock[0])
    with open(log, "a", encoding="utf-8") as f:
        for i in range(100):
            clock[0] = 1000.0 + i * 0.5
            line = f"[node{i % 2}/rank{i % 4}] line {i} é\n"
            index.before(line)
            f.write(line)
    index.close()
    return log


def test_since_seeks_by_the_time_index_and_tail_reads_from_the_end(tmp_path):
    log = _write_log(tmp_path, [0.0])
    lines, end = from_file(log, LogSelection(since=1040.0))
    lines = list(lines)
    assert lines[0] == "[node0/rank0] line 80 é\n" and len(lines) == 20 and end == log.stat().st_size
    picked, _ = from_file(log, LogSelection(rank=3, tail=3))
    assert list(picked) == [f"[node1/rank3] line {i} é\n" for i in (91, 95, 99)]
    picked, _ = from_file(log, LogSelection(node=1, since=1045.0, tail=100))
    assert [x.split()[2] for x in picked] == ["91", "93", "95", "97", "99"]
    assert list(from_file(log, LogSelection(since=2000.0))[0]) == []  # nothing written since
    assert list(from_file(tmp_path / "none.log", LogSelection(tail=5))[0]) == []


def test_a_log_from_before_the_index_is_read_whole(tmp_path):
    (tmp_path / "job.log").write_text("".join(LOG))
    lines, _ = from_file(tmp_path / "job.log", LogSelection(since=0.0, node=0))
    assert list(lines) == [LOG[0], LOG[1], LOG[4]]


FAILED = ["[node0/rank0] working\n",
          "[node1/rank3] rank 3 exits with 3\n",
          "[node1] cloudtrain launch: rank 3 (local rank 1) failed first: exit code 3\n",
          "[node1] cloudtrain launch: rank 3 | Traceback (most recent call last):\n",
          "[node1] cloudtrain launch: rank 3 | ValueError: bad batch\n",
          "[node0] cloudtrain launch: rank 0 (local rank 0) failed first: killed by signal 15\n"]


def test_the_first_failing_rank_is_the_one_the_launchers_reported_first():
    found = first_failure(FAILED)
    assert (found["node"], found["rank"]) == (1, 3)
    assert found["reason"].startswith("node 1 rank 3 exited with code 3: Traceback") and "bad batch" in found["reason"]
    assert first_failure(FAILED[:2]) is None


@pytest.mark.parametrize("provider", ["slurm", "azure", "tione"])
def test_a_platform_that_merges_its_logs_says_so_in_one_line(provider):
    from cloudtrain.extend.plugins import get_provider_class
    from cloudtrain.spec.errors import BadInput
    cls = get_provider_class(provider)
    with pytest.raises(BadInput) as caught:
        cls.select_logs(object.__new__(cls), "job", LogSelection(node=1))
    assert "\n" not in str(caught.value) and f"{provider} cannot tell nodes apart" in str(caught.value)


def test_a_follower_goes_on_from_where_the_selection_ended(tmp_path):
    from cloudtrain.providers.hosted import follow_file
    log = _write_log(tmp_path, [0.0])
    picked, end = from_file(log, LogSelection(rank=1, tail=1))
    assert list(picked) == ["[node1/rank1] line 97 é\n"]
    with open(log, "a", encoding="utf-8") as f:
        f.write("[node1/rank1] after é\n[node0/rank0] after too\n")
    assert list(follow_file(log, done=lambda: True, start=end)) == ["[node1/rank1] after é\n",
                                                                    "[node0/rank0] after too\n"]


def test_a_failed_cloud_jobs_cause_comes_from_its_log_with_the_nodes_last_lines():
    from types import SimpleNamespace

    from cloudtrain.commands.logscmd import failure_header
    from cloudtrain.providers.provider import JobStatus, State
    pod_lines = ["[node0] epoch 1\n", "[node1] Traceback (most recent call last):\n", "[node1] ValueError: bad\n",
                 "[node1] cloudtrain launch: rank 3 (local rank 1) failed first: exit code 1\n",
                 "[node1] cloudtrain launch: rank 3 | ValueError: bad\n"]
    run = SimpleNamespace(handle="kubeflow://team-a/kjob", provider=SimpleNamespace(local_state=False))
    said = failure_header(run, JobStatus("kubeflow://team-a/kjob", State.FAILED, message="BackoffLimitExceeded"),
                          pod_lines)
    assert said[0] == "cloudtrain: kubeflow://team-a/kjob failed: node 1 rank 3 exited with code 1: ValueError: bad"
    assert said[1] == "cloudtrain: its last lines (node 1 rank 3):" and said[-1].endswith("rank 3 | ValueError: bad")
    assert failure_header(run, JobStatus("x://y", State.SUCCEEDED), pod_lines) == []
    assert failure_header(run, JobStatus("x://y", State.FAILED, message="OOMKilled"), pod_lines[:1]) == \
        ["cloudtrain: kubeflow://team-a/kjob failed: OOMKilled"]
