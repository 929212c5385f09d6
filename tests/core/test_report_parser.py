"""``cloudtrain.runtime.progress``: a job's progress read from its log (issue 43): report lines,
Hugging Face Trainer's log dicts, plain ``epoch N/M`` / ``step N/M`` lines, from rank 0 only."""
from __future__ import annotations

import json

from cloudtrain.launch.report import line
from cloudtrain.runtime.progress import describe, from_file, from_lines, lines_backwards, parse_line


def report_line(at, step, total, **metrics):
    return "[node0/rank0] " + line(at, (step, total, None, None), metrics)


def test_a_report_line():
    assert parse_line(report_line(100.0, 12, 50, loss=0.5)) == ("report", 100.0, {"step": 12, "total_steps": 50},
                                                                {"loss": 0.5})


def test_a_hugging_face_trainer_log_dict():
    text = "{'loss': 0.31, 'grad_norm': 1.25, 'learning_rate': 4.5e-05, 'epoch': 1.5}"
    assert parse_line(text) == ("huggingface", None, {"epoch": 1.5},
                                {"loss": 0.31, "grad_norm": 1.25, "learning_rate": 4.5e-05})


def test_plain_epoch_and_step_lines_with_their_values():
    assert parse_line("[node0/rank0] epoch 3/10 loss 0.2104 train_acc 0.9400") == \
        ("plain", None, {"epoch": 3, "total_epochs": 10}, {"loss": 0.2104, "train_acc": 0.94})
    assert parse_line("Step 120/5000: loss=0.7") == ("plain", None, {"step": 120, "total_steps": 5000}, {"loss": 0.7})


def test_other_ranks_malformed_and_hostile_lines_are_ignored():
    for text in ["[node0/rank1] epoch 9/10 loss 0.1", "[node1/rank2] " + line(1.0, (9, 9, None, None), {}),
                 "[node1] step 3/4", "CLOUDTRAIN_PROGRESS {bad json", 'CLOUDTRAIN_PROGRESS {"v":2,"step":1}',
                 'CLOUDTRAIN_PROGRESS ["v",1]', 'CLOUDTRAIN_PROGRESS {"v":1,"step":"1"}',
                 "{'loss': __import__('os').system('true'), 'epoch': 1}", "{'loss': 0.3, 'epoch': [1]}",
                 "epoch 11/10", "step 1/0", "[" * 20000 + "'loss'", "nothing here",
                 "{'loss': " + "[" * 4000 + "]" * 4000 + ", 'epoch': 1}", "{'loss': 9" + "9" * 5000 + ", 'epoch': 1}",
                 "{'loss': 1, 'epoch': 10**10**10}"]:
        assert parse_line(text) is None, text


def test_a_secret_named_metric_in_a_log_is_not_read():
    text = "{'loss': 0.3, 'hf_token': 12345, 'epoch': 1.0}"
    assert parse_line(text)[3] == {"loss": 0.3}
    raw = 'CLOUDTRAIN_PROGRESS {"v":1,"t":1,"step":1,"metrics":{"aws_secret_access_key":5,"loss":1}}'
    assert parse_line(raw)[3] == {"loss": 1}


def test_newest_values_win_and_the_rate_gives_the_eta():
    lines = [report_line(100.0 + i, 10 * i, 1000, loss=1.0 / (i + 1), samples_per_s=412) for i in range(20)]
    lines.append("[node0/rank0] {'learning_rate': 0.001, 'epoch': 0.19}")
    found = from_lines(reversed(lines))
    assert (found.step, found.total_steps, found.epoch) == (190, 1000, 0.19)
    assert found.metrics == {"learning_rate": 0.001, "loss": 1.0 / 20, "samples_per_s": 412}
    assert found.steps_per_s == 10.0 and found.eta == 81.0
    assert describe(found, "1.20 USD so far") == \
        "step 190/1000 · epoch 0.19 · learning_rate 0.001 · loss 0.05 · 412 samples/s · ETA 1 min · 1.20 USD so far"


def test_epochs_alone_are_timed_from_the_start_and_the_log_time():
    lines = ["[node0/rank0] epoch 2/10 loss 0.5", "[node0/rank0] epoch 3/10 loss 0.4"]
    found = from_lines(reversed(lines), started_at=1000.0, written_at=1030.0)
    assert (found.epoch, found.total_epochs, found.metrics, found.at) == (3, 10, {"loss": 0.4}, 1030.0)
    assert found.eta == 70.0 and found.steps_per_s is None
    assert "ETA 1 min" in describe(found)


def test_a_log_without_progress_has_none(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("[node0/rank0] hello\n[cloudtrain] job SUCCEEDED\n")
    assert from_file(log) is None and from_file(tmp_path / "missing.log") is None


def test_the_tail_of_a_log_of_100000_reports_is_read_backwards(tmp_path):
    log = tmp_path / "job.log"
    with open(log, "w") as f:
        for i in range(1, 100001):
            f.write(report_line(1000.0 + i / 10, i, 100000, loss=1.0 / i) + "\n")
            if i % 1000 == 0:
                f.write("[node0/rank1] some other rank's chatter\n")
        f.write("[cloudtrain] job SUCCEEDED\n")
    read = []
    found = from_lines(_recording(lines_backwards(log), read))
    assert (found.step, found.total_steps, found.metrics) == (100000, 100000, {"loss": 1e-05})
    assert found.eta == 0.0 and abs(found.steps_per_s - 10.0) < 1e-6
    assert len(read) < 100  # the newest lines only, not the whole file
    assert from_file(log).step == 100000


def test_lines_backwards_gives_every_line_newest_first_across_blocks(tmp_path):
    log = tmp_path / "x.log"
    lines = [f"line {i} " + "x" * (i % 37) for i in range(500)]
    log.write_text("\n".join(lines) + "\n")
    assert list(lines_backwards(log, block=64)) == lines[::-1]
    got = list(lines_backwards(log, tail=100, block=64))
    assert 0 < len(got) < 10 and got == lines[::-1][:len(got)]  # whole lines only


def _recording(lines, into):
    for text in lines:
        into.append(text)
        yield text


def test_to_dict_is_json():
    found = from_lines([report_line(5.0, 1, 2, loss=float("nan"))])
    assert json.loads(json.dumps(found.to_dict()))["metrics"] == {"loss": None}


def test_a_large_number_is_shown_whole_not_in_exponent_form():
    from cloudtrain.runtime.progress import _shown
    assert (_shown(18470.3), _shown(412.25), _shown(0.0736), _shown(92)) == ("18470", "412.2", "0.0736", "92")
