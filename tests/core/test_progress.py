"""Feedback while waiting: a live status line on a terminal, plain lines otherwise."""
import io

from cloudtrain.commands.progress import StatusLine, describe
from cloudtrain.providers.provider import JobStatus, State


def status(state, up=2, message=""):
    return JobStatus("local://j-1", state, nodes=2, nodes_up=up, started_at=100.0, message=message,
                     ended_at=165.0 if state.terminal else None)


def test_describe_shows_state_elapsed_and_nodes():
    assert describe(status(State.RUNNING), now=172.0) == "local://j-1  RUNNING  01:12  nodes 2/2 up"
    assert describe(status(State.FAILED, 0, "node 1 exited with code 3")) == \
        "local://j-1  FAILED  01:05  nodes 0/2 up  node 1 exited with code 3"


def test_live_line_is_redrawn_around_log_lines():
    err, out = io.StringIO(), io.StringIO()
    line = StatusLine(stream=err, out=out, live=True)
    line.update(status(State.RUNNING))
    line.log("[node0/rank0] epoch 1")
    line.update(status(State.RUNNING))
    line.close()
    assert out.getvalue() == "[node0/rank0] epoch 1\n"
    assert err.getvalue().count("\r\033[K") >= 3 and err.getvalue().endswith("\n")


def test_plain_lines_only_when_something_changes():
    err, out = io.StringIO(), io.StringIO()
    line = StatusLine(stream=err, out=out, live=False)
    for s in (status(State.RUNNING), status(State.RUNNING), status(State.RUNNING, 1), status(State.SUCCEEDED, 0)):
        line.update(s)
    lines = err.getvalue().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["RUNNING", "RUNNING", "SUCCEEDED"]
    assert "\r" not in err.getvalue()
