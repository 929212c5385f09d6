"""The supervisor's generic part with in-memory nodes: who ended, how, and what the store says.

The monitor sleeps until a node's output ends (or a cancel) instead of polling; these tests
check it still sees every way a node can end.
"""
import json
import signal
import threading

import pytest

from cloudtrain.runtime.store import Store
from cloudtrain.runtime.supervise import Node, Supervisor


class FakeNode(Node):
    """Prints ``lines``; exits with ``code`` once ``exit`` is set.  With ``hold``, its output
    stays open after it exited (a child it left behind holds the pipe) until it is stopped."""

    def __init__(self, index, lines=(), code=0, exits=True, hold=False):
        self.index, self._lines, self.code, self.hold = index, list(lines), code, hold
        self.exited = threading.Event()
        self.released = threading.Event()
        self.stopped = False
        if exits:
            self.exited.set()

    def lines(self):
        yield from self._lines
        if self.hold:
            self.released.wait()
        else:
            self.exited.wait(30)

    def poll(self):
        return self.code if self.exited.is_set() else None

    def stop(self, grace):
        self.stopped = True
        if not self.exited.is_set():
            self.code = -15
            self.exited.set()
        self.released.set()


class FakeSupervisor(Supervisor):
    def __init__(self, run_dir, nodes):
        self.fakes = nodes
        super().__init__(run_dir)

    def start_node(self, spec, attempt):
        return self.fakes[spec["node"]]


@pytest.fixture
def make(tmp_path, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIN_HOME", str(tmp_path / "home"))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def make(nodes, distribution="none"):
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        plan = {"job_id": "j-1", "nodes": [{"node": n.index} for n in nodes], "nproc_per_node": 1,
                "distribution": distribution, "max_restarts": 0}
        (run_dir / "plan.json").write_text(json.dumps(plan))
        Store().add_job(id="j-1", provider="local", name="j", nodes=len(nodes), run_dir=str(run_dir),
                        state="PENDING")
        return FakeSupervisor(run_dir, nodes)

    yield make
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def test_a_job_whose_nodes_all_succeed_succeeds_with_their_output(make):
    sup = make([FakeNode(0, ["hello from 0\n"]), FakeNode(1, ["hello from 1\n"])])
    assert sup.run() == 0
    row = Store().get_job("j-1")
    assert row["state"] == "SUCCEEDED" and row["exit_code"] == 0
    log = (sup.run_dir / "job.log").read_text()
    assert "[node0/rank0] hello from 0" in log and "[node1/rank1] hello from 1" in log  # type none: a rank per node
    assert log.rstrip().endswith("[cloudtrain] job succeeded")


def test_a_failed_node_fails_the_job_and_stops_the_others(make):
    failing, running = FakeNode(0, ["boom\n"], code=3), FakeNode(1, exits=False)
    sup = make([failing, running])
    assert sup.run() == 1
    row = Store().get_job("j-1")
    assert row["state"] == "FAILED" and "node 0 exited with code 3" in row["message"]
    assert running.stopped and running.poll() == -15


def test_a_node_that_exits_while_its_output_stays_open_is_still_seen(make):
    # No end of output wakes the monitor (the output stays open until the node is stopped,
    # which happens only after the monitor saw the exit): its periodic re-check has to find it.
    node = FakeNode(0, ["done\n"], hold=True)
    sup = make([node])
    rescued = []
    watchdog = threading.Timer(30, lambda: (rescued.append(True), node.released.set()))
    watchdog.start()
    try:
        assert sup.run() == 0
    finally:
        watchdog.cancel()
    assert not rescued, "the monitor noticed the exit only once the output was closed for it"
    assert Store().get_job("j-1")["state"] == "SUCCEEDED"


def test_a_cancel_wakes_the_monitor(make):
    node = FakeNode(0, exits=False)
    sup = make([node])
    threading.Timer(0.2, sup.on_signal, args=(signal.SIGTERM, None)).start()
    assert sup.run() == 130
    assert Store().get_job("j-1")["state"] == "CANCELLED" and node.stopped
