"""The retention of ``$CLOUDTRAIN_HOME/runs`` (issue 30, item 7): the user config's ``runs:`` rule,
applied when a local job is submitted and by ``cloudtrain prune``; real run directories and store
rows under a private CLOUDTRAIN_HOME, real local jobs, through the command line."""
import os
import secrets
import time

from conftest import run_cli, write_job

DAY = 86400.0
QUICK = 'name: quick\ncommand: [python, -c, "print(1)"]\ndistribution: {type: none}\n'
SLEEPER = 'name: sleeper\ncommand: [python, -c, "import time; time.sleep(300)"]\ndistribution: {type: none}\n'


def _store(home):
    from cloudtrain.runtime.store import Store
    return Store(home / "state.db")


def ended_run(home, name, days_ago, *, state="SUCCEEDED", run_dir=None):
    """A finished local job's store row and its run directory (code, a log), ended ``days_ago``."""
    job_id = f"{name}-{secrets.token_hex(3)}"
    run_dir = run_dir or home / "runs" / job_id
    if not os.path.lexists(run_dir):
        (run_dir / "code").mkdir(parents=True)
        (run_dir / "code" / "train.py").write_text("x" * (1 << 20))
        (run_dir / "job.log").write_text("[cloudtrain] job succeeded\n")
    store = _store(home)
    store.add_job(id=job_id, provider="local", name=name, nodes=1, run_dir=str(run_dir), state=state)
    ended = time.time() - days_ago * DAY
    store.update_job(job_id, created_at=ended - 600, started_at=ended - 600, ended_at=ended, exit_code=0)
    return f"local://{job_id}", run_dir


def user_config(tmp_path, text):
    path = tmp_path / "user-config.yaml"
    path.write_text(text)
    return {"CLOUDTRAIN_CONFIG": str(path)}


def make_old(home, handle, days_ago, ended=True):
    when = time.time() - days_ago * DAY
    _store(home).update_job(handle.split("://")[1], created_at=when, **({"ended_at": when} if ended else {}))


def test_a_local_submit_removes_the_runs_the_default_rule_lets_go_and_never_a_running_one(tmp_path, home):
    """Default rule: ended over 30 days ago and not among the newest 10 finished runs."""
    sleeper = write_job(tmp_path / "s", SLEEPER)
    running = run_cli("submit", sleeper, "--detach", check=0).stdout.strip()
    make_old(home, running, 90, ended=False)  # as old as can be, and running
    (home / ".last-prune").unlink(missing_ok=True)  # that submit applied the rule already: as if an hour had passed
    recent = [ended_run(home, "recent", 1)]
    old = [ended_run(home, f"old{i}", 40 + i) for i in range(11)]  # the newest 9 of them stay (10 - recent)
    proc = run_cli("submit", write_job(tmp_path, QUICK), "--detach", check=0)
    notes = [line for line in proc.stderr.splitlines() if "removed" in line]
    assert len(notes) == 1, proc.stderr
    assert "removed 2 finished runs that ended over 30d ago (2.0 MB freed" in notes[0]
    gone = {h for h, d in old if not d.exists()}
    assert gone == {old[9][0], old[10][0]}  # the two that ended longest ago
    assert all(d.exists() for _, d in recent + old[:9])
    assert (home / "runs" / running.split("://")[1]).is_dir()
    assert run_cli("status", running, check=0).stdout.startswith(f"{running}  RUNNING")
    run_cli("cancel", running, check=0)


def test_the_rule_is_applied_at_most_hourly_and_off_disables_it(tmp_path, home, monkeypatch):
    from cloudtrain.providers.retention import apply_retention
    config = tmp_path / "user-config.yaml"
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(config))
    config.write_text("runs: {keep_days: 7, keep_last: 0}\n")
    now = time.time()
    _, first_dir = ended_run(home, "first", 8)
    assert apply_retention(now=now) == 1 and not first_dir.exists()
    _, second_dir = ended_run(home, "second", 8)
    assert apply_retention(now=now + 1800) == 0 and second_dir.exists()  # within the hour: not again
    config.write_text("runs: {keep_days: off}\n")
    assert apply_retention(now=now + 7200) == 0 and second_dir.exists()
    config.write_text("runs: {keep_days: 0}\n")
    assert apply_retention(now=now + 7200) == 0 and second_dir.exists()
    config.write_text("runs: {keep_days: 7, keep_last: 0}\n")
    assert apply_retention(now=now + 7200) == 1 and not second_dir.exists()


def test_pruning_a_run_keeps_its_ledger_record(tmp_path, home):
    from cloudtrain.orchestrate import ledger
    job = write_job(tmp_path, QUICK)
    submitted = run_cli("submit", job, "--detach", check=0).stdout.strip()  # through the ledger
    assert run_cli("wait", submitted).returncode == 0
    make_old(home, submitted, 40)
    before = ledger.entry(submitted, store=_store(home))
    assert before.state == "SUCCEEDED" and before.duration() is not None
    direct, _ = ended_run(home, "direct", 40, state="FAILED")  # a job the ledger never recorded
    proc = run_cli("prune", "--older-than", "7d", check=0)
    assert "2 finished runs older than 7d" in proc.stdout
    assert not (home / "runs" / submitted.split("://")[1]).exists()
    after = ledger.entry(submitted, store=_store(home))
    assert after is not None, "the ledger lost the job"
    assert (after.state, after.started_at, after.ended_at, after.nodes) == \
           (before.state, before.started_at, before.ended_at, before.nodes)
    assert after.duration() == before.duration()
    kept = ledger.entry(direct, store=_store(home))
    assert kept is not None and kept.state == "FAILED" and kept.duration() == 600
    listed = run_cli("list", "-o", "json", check=0).stdout
    assert submitted in listed and direct in listed


def test_a_link_planted_in_runs_is_never_followed(tmp_path, home):
    sleeper = write_job(tmp_path / "s", SLEEPER)
    running = run_cli("submit", sleeper, "--detach", check=0).stdout.strip()
    running_dir = home / "runs" / running.split("://")[1]
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.bin").write_text("keep me")
    link_out, link_in = home / "runs" / "out-link", home / "runs" / "in-link"
    link_out.symlink_to(outside, target_is_directory=True)
    link_in.symlink_to(running_dir, target_is_directory=True)
    to_outside, _ = ended_run(home, "out", 40, run_dir=link_out)
    to_running, _ = ended_run(home, "in", 40, run_dir=link_in)
    _, real_dir = ended_run(home, "real", 40)
    (real_dir / "data").symlink_to(outside, target_is_directory=True)  # inside a run that goes
    proc = run_cli("prune", "--older-than", "7d", check=0)
    assert (outside / "data.bin").read_text() == "keep me"
    assert running_dir.is_dir() and (running_dir / "plan.json").exists()
    assert link_out.is_symlink() and link_in.is_symlink()
    assert not os.path.lexists(real_dir)
    assert f"left {to_outside} alone" in proc.stdout and f"left {to_running} alone" in proc.stdout
    assert run_cli("status", running, check=0).stdout.startswith(f"{running}  RUNNING")
    run_cli("cancel", running, check=0)


def test_prune_applies_the_user_configs_rule_and_its_options_override_it(tmp_path, home):
    env = user_config(tmp_path, "runs: {keep_days: 20, keep_last: 1}\n")
    _, newest_dir = ended_run(home, "newest", 25)
    _, older_dir = ended_run(home, "older", 26)
    young, young_dir = ended_run(home, "young", 10)
    proc = run_cli("prune", env=env, check=0)  # keep_last 1 keeps young; newest and older are past 20d
    assert "2 finished runs older than 20d, beyond the newest 1" in proc.stdout
    assert young_dir.exists() and not newest_dir.exists() and not older_dir.exists()
    env = user_config(tmp_path, "runs: {keep_days: 'off'}\n")
    proc = run_cli("prune", env=env, check=0)
    assert "retention is off" in proc.stdout and young_dir.exists()
    proc = run_cli("prune", "--older-than", "5d", env=env, check=0)  # given: it prunes
    assert f"removed {young}" in proc.stdout and not young_dir.exists()


def test_config_set_takes_the_rule_and_refuses_what_it_could_not_apply(tmp_path):
    env = user_config(tmp_path, "{}\n")
    config = tmp_path / "user-config.yaml"
    proc = run_cli("config", "set", "runs.keep_days=14", "runs.keep_last=3", env=env, check=0)
    assert "runs.keep_days set" in proc.stdout
    from cloudtrain.spec import yamlio
    assert yamlio.read(config.read_text()).data == {"runs": {"keep_days": 14, "keep_last": 3}}
    for item in ("runs.keep_days=soon", "runs.keep_days=-3", "runs.keep_last=1.5", "runs.keep_dayz=3"):
        proc = run_cli("config", "set", item, env=env)
        assert proc.returncode == 2, (item, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"cloudtrain: error: config set {item}") \
            and "nothing was written" in lines[0]
    assert "did you mean 'keep_days'" in run_cli("config", "set", "runs.keep_dayz=3", env=env).stderr
    assert run_cli("config", "set", "--project", "runs.keep_days=3", env=env, cwd=tmp_path).returncode == 2
    assert not (tmp_path / ".cloudtrain.yaml").exists()
    assert yamlio.read(config.read_text()).data == {"runs": {"keep_days": 14, "keep_last": 3}}
    config.write_text("providers: {}\nruns:\n  keep_days: a month\n")
    job = write_job(tmp_path / "j", QUICK)
    proc = run_cli("validate", job, env=env)
    assert proc.returncode == 2
    assert f"{config}:3: runs.keep_days: expected a whole number of days" in proc.stderr
    config.write_text("runs: {keep_days: 14}\n")
    assert run_cli("validate", job, env=env).returncode == 0
    project = job.parent / ".cloudtrain.yaml"
    project.write_text("runs: {keep_days: 1}\n")  # a team's file cannot shorten this machine's retention
    proc = run_cli("validate", job, env=env)
    assert proc.returncode == 2 and f"{project}:1: runs: the retention of runs is this machine's" in proc.stderr


def test_the_automatic_rule_keeps_what_a_job_produced_and_prune_removes_it_when_asked(tmp_path, home, monkeypatch):
    """A run whose output/ holds files loses its working copies, not its results: the job stays in
    ``list`` and ``cloudtrain outputs`` still copies them; ``cloudtrain prune`` removes it whole."""
    from cloudtrain.providers.retention import apply_retention
    monkeypatch.setenv("CLOUDTRAIN_CONFIG", str(tmp_path / "user-config.yaml"))
    (tmp_path / "user-config.yaml").write_text("runs: {keep_days: 7, keep_last: 0}\n")
    handle, run_dir = ended_run(home, "trained", 8)
    (run_dir / "output").mkdir()
    (run_dir / "output" / "model.pt").write_bytes(b"weights")
    (run_dir / "plan.json").write_text('{"output_dir": "%s"}' % (run_dir / "output"))
    now = time.time()
    assert apply_retention(now=now) == 1
    assert not (run_dir / "code").exists()  # the bulk went
    assert (run_dir / "output" / "model.pt").read_bytes() == b"weights" and (run_dir / "job.log").exists()
    assert handle in run_cli("list", check=0).stdout
    dest = tmp_path / "got"
    run_cli("outputs", handle, "--dest", str(dest), check=0)
    assert (dest / "model.pt").read_bytes() == b"weights"
    assert apply_retention(now=now + 2 * 3600) == 0  # trimmed once: not again
    run_cli("prune", check=0)
    assert not run_dir.exists()
