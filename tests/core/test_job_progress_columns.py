"""``list``'s PROGRESS and ETA columns and ``wait``'s progress lines (issue 43), from a job's log."""
import io
import json
from pathlib import Path

from cloudtrain.commands.jobprogress import WaitProgress, eta_cell, progress_cell, with_columns
from cloudtrain.commands.progress import StatusLine
from cloudtrain.launch.report import line as report_line
from cloudtrain.orchestrate.ledger import Entry, table
from cloudtrain.providers.provider import JobStatus, State
from cloudtrain.runtime.progress import Progress


def test_the_cells_say_steps_epochs_and_time_left_or_a_dash():
    assert progress_cell(Progress(step=1200, total_steps=5000)) == "1200/5000 (24%)"
    assert progress_cell(Progress(step=7)) == "step 7"
    assert progress_cell(Progress(epoch=3, total_epochs=10)) == "epoch 3/10 (30%)"
    assert progress_cell(Progress(metrics={"loss": 0.3})) == "-" and progress_cell(None) == "-"
    assert eta_cell(Progress(eta=720.0), terminal=False) == "12 min"
    assert eta_cell(Progress(eta=720.0), terminal=True) == "-" and eta_cell(None, terminal=False) == "-"


def test_the_table_gains_progress_and_eta_after_duration():
    found = [Entry("local://a-1", "local", "a-1", "RUNNING", 100.0, started_at=100.0, local=True),
             Entry("sagemaker://b", "sagemaker", "b", "RUNNING", 100.0)]
    rows = with_columns(table(found, now=200.0), found, {"local://a-1": Progress(step=5, total_steps=10, eta=30.0)})
    header = rows[0]
    assert header[header.index("DURATION") + 1:header.index("DURATION") + 3] == ("PROGRESS", "ETA")
    at = header.index("PROGRESS")
    assert rows[1][at:at + 2] == ("5/10 (50%)", "30 s") and rows[2][at:at + 2] == ("-", "-")
    assert all(len(r) == len(header) for r in rows)


class _Provider:
    local_state = True

    def __init__(self, run_dir: Path):
        self._dir = run_dir

    def run_dir(self, job_id):
        return self._dir


class _Run:
    def __init__(self, run_dir):
        self.provider, self.id = _Provider(run_dir), "j-1"


def _status(state=State.RUNNING):
    return JobStatus("local://j-1", state, nodes=1, nodes_up=1, started_at=1.0)


def _report(log: Path, step: int, t: float) -> None:
    with open(log, "a") as f:
        f.write("[node0/rank0] " + report_line(t, (step, 100, None, None), {"loss": 1.0 / step}) + "\n")


def test_wait_prints_a_plain_line_when_the_progress_changes_at_most_once_per_period(tmp_path):
    log = tmp_path / "job.log"
    clock = [0.0]
    err = io.StringIO()
    shown = WaitProgress(_Run(tmp_path), StatusLine(stream=err, out=io.StringIO(), live=False), every=10.0,
                         clock=lambda: clock[0])
    for i in range(1, 31):  # a report a second, a status read a second
        _report(log, i, 1000.0 + i)
        clock[0] = float(i)
        shown.update(_status())
    _report(log, 31, 1031.0)
    shown.update(_status(State.SUCCEEDED))
    lines = [x for x in err.getvalue().splitlines() if "step " in x]
    assert [x.split("step ")[1].split(" ")[0] for x in lines] == ["1/100", "11/100", "21/100", "31/100"]
    assert lines[0].startswith("local://j-1  ") and "\r" not in err.getvalue()


def test_wait_on_a_terminal_redraws_one_line_with_a_bar(tmp_path):
    log = tmp_path / "job.log"
    _report(log, 25, 1000.0)
    err = io.StringIO()
    line = StatusLine(stream=err, out=io.StringIO(), live=True)
    WaitProgress(_Run(tmp_path), line).update(_status())
    line.close()
    text = err.getvalue()
    assert text.startswith("\r\033[K") and "[#####---------------]  25% step 25/100" in text
    assert text.count("\n") == 1  # the one line, ended when the wait ends


def test_a_hostile_metric_name_cannot_drive_the_terminal(tmp_path):
    (tmp_path / "job.log").write_text("[node0/rank0] {'loss': 0.5, 'epoch': 1.0, '\x1b]52;c;AAAA\x07': 1}\n")
    err = io.StringIO()
    line = StatusLine(stream=err, out=io.StringIO(), live=True)
    WaitProgress(_Run(tmp_path), line).update(_status())
    assert "\x1b]" not in err.getvalue() and "\x07" not in err.getvalue() and "loss 0.5" in err.getvalue()


def test_list_json_has_the_fields(tmp_path):
    from cloudtrain.commands.jobprogress import json_fields
    e = Entry("local://a-1", "local", "a-1", "SUCCEEDED", 100.0, local=True)
    fields = json_fields(e, {"local://a-1": Progress(step=10, total_steps=10, eta=0.0)})
    assert json.loads(json.dumps(fields))["progress"]["step"] == 10 and fields["eta"] is None


def test_list_reads_each_local_jobs_log_and_no_other(home):
    from cloudtrain.commands.jobprogress import of_entries
    run = home / "runs" / "a-1"
    run.mkdir(parents=True)
    _report(run / "job.log", 40, 1000.0)
    _report(run / "job.log", 50, 1010.0)
    found = [Entry("local://a-1", "local", "a-1", "RUNNING", 1.0, started_at=990.0, local=True),
             Entry("local://gone-2", "local", "gone-2", "SUCCEEDED", 1.0, local=True),  # its run was removed
             Entry("sagemaker://x", "sagemaker", "a-1", "RUNNING", 1.0)]  # not read, even named alike
    progress = of_entries(found)
    assert list(progress) == ["local://a-1"]
    assert (progress["local://a-1"].step, progress["local://a-1"].eta) == (50, 50.0)  # 1 step/s, 50 to go
