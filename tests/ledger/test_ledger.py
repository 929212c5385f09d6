"""issue 31 item 3: the ledger of every submission on every provider, read by a plain
``cloudtrain list`` (and ``cloudtrain.orchestrate.ledger`` / ``cloudtrain.jobs``): real local jobs and jobs
of the SageMaker double (moto) side by side; filters; stale cloud rows read again; an older
state.db keeps working."""
import json
import sqlite3
import time

import pytest

from conftest import EXAMPLES, run_cli, write_job  # noqa: E402

ROLE = "arn:aws:iam::123456789012:role/train"
BUCKET = "ct-bucket"
SAGEMAKER = ["--set", f"providers.sagemaker.role_arn={ROLE}", "--set", f"providers.sagemaker.output_s3=s3://{BUCKET}/runs"]


@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, BUCKET)


def quick_job(tmp_path, name="quick", extra=""):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("print('done')\n")
    return write_job(tmp_path, f"""
        name: {name}
        code: code
        command: python train.py
        distribution: {{type: ddp, nodes: 1, procs_per_node: 1}}
        {extra}
    """, name=f"{name}.yaml")


def listed(*args, env=None):
    proc = run_cli("list", "-o", "json", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return {j["handle"]: j for j in json.loads(proc.stdout)}


def test_a_plain_list_shows_local_and_cloud_jobs_with_where_and_how_they_ran(aws, tmp_path, home):
    env = aws.env()
    local = run_cli("submit", quick_job(tmp_path), "--emulate", "sagemaker", env=env)
    assert local.returncode == 0, local.stderr
    local_handle = next(line.split()[1] for line in local.stderr.splitlines() if line.startswith("submitted "))
    cloud = run_cli("submit", "-p", "sagemaker", EXAMPLES / "digits-ddp" / "job.yaml", *SAGEMAKER, "--detach",
                    "--set", "spot=true", env=env)
    assert cloud.returncode == 0, cloud.stderr
    cloud_handle = cloud.stdout.strip()

    rows = listed(env=env)  # no -p: every provider's
    assert set(rows) == {local_handle, cloud_handle}
    lj, cj = rows[local_handle], rows[cloud_handle]
    assert (lj["provider"], lj["state"], lj["emulated"], lj["restarts"]) == ("local", "SUCCEEDED", "sagemaker", 0)
    assert lj["duration"] is not None and lj["duration"] >= 0
    assert cj["provider"] == "sagemaker" and cj["nodes"] == 2 and cj["spot"] is True
    assert cj["instance_type"].startswith("ml.") and cj["state"] in ("PENDING", "STARTING")
    assert cj["rate"] is None and cj["cost"] is None  # the catalogs have no prices yet: none is made up
    assert cj["submitted_at"] >= lj["submitted_at"]

    # -p of a cloud asks the platform too; what the submit recorded stays
    again = listed("-p", "sagemaker", env=env)
    assert set(again) == {cloud_handle}
    assert {k: again[cloud_handle][k] for k in ("instance_type", "submitted_at", "name", "spot")} == \
        {k: cj[k] for k in ("instance_type", "submitted_at", "name", "spot")}

    # the filters
    assert set(listed("-p", "local", env=env)) == {local_handle}
    assert set(listed("--state", "succeeded", env=env)) == {local_handle}
    assert set(listed("--since", "1h", env=env)) == {local_handle, cloud_handle}
    assert listed("--since", "2999-01-01", env=env) == {}
    text = run_cli("list", env=env, check=0).stdout
    header = text.splitlines()[0].split()
    assert header[:11] == ["HANDLE", "STATE", "NODES", "INSTANCE", "SUBMITTED", "DURATION", "PROGRESS", "ETA",
                           "RESTARTS", "EMULATED", "COST"]
    bad = run_cli("list", "--state", "DONE", env=env)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1

    # the Python API returns the same rows
    from cloudtrain import jobs
    from cloudtrain.orchestrate import ledger
    assert [e.handle for e in ledger.entries()] == [cloud_handle, local_handle]
    assert ledger.entry(cloud_handle).instance_type == cj["instance_type"]
    assert [e.handle for e in jobs(providers=["local"])] == [local_handle]


def test_a_stale_cloud_row_is_read_again_by_a_plain_list(aws, tmp_path, home):
    env = aws.env()
    handle = run_cli("submit", "-p", "sagemaker", EXAMPLES / "digits-ddp" / "job.yaml", *SAGEMAKER, "--detach",
                     env=env, check=0).stdout.strip()
    name = handle.rsplit("/", 1)[1]
    aws.set_training(name, "Completed", "Completed")
    assert listed(env=env)[handle]["state"] in ("PENDING", "STARTING")  # read a moment ago: as stored
    from cloudtrain.runtime.store import Store
    Store(home / "state.db").ledger_update(handle, refreshed_at=time.time() - 3600)
    row = listed(env=env)[handle]
    assert row["state"] == "SUCCEEDED" and row["ended_at"] is not None
    assert listed("--refresh", env=env)[handle]["state"] == "SUCCEEDED"


def test_cost_so_far_is_rate_times_nodes_times_hours(tmp_path):
    from cloudtrain.orchestrate import ledger
    from cloudtrain.runtime.store import Store
    store = Store(tmp_path / "state.db")
    now = time.time()
    store.ledger_put({"handle": "azure://s/r/w/j", "provider": "azure", "job_id": "s/r/w/j", "nodes": 4,
                      "rate": 3.0, "currency": "USD", "submitted_at": now - 7300, "started_at": now - 7200,
                      "state": "RUNNING"})
    e = ledger.entry("azure://s/r/w/j", store=store)
    assert e.cost(now) == pytest.approx(24.0) and e.duration(now) == pytest.approx(7200)
    assert ledger.table([e], now)[1][5:9] == ("2h00m", "0", "-", "24.00 USD")


OLD_SCHEMA = """
CREATE TABLE jobs (id TEXT PRIMARY KEY, provider TEXT NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL,
    raw_state TEXT, message TEXT NOT NULL DEFAULT '', nodes INTEGER NOT NULL, nodes_up INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER, supervisor_pid INTEGER, run_dir TEXT NOT NULL, created_at REAL NOT NULL, started_at REAL,
    ended_at REAL);
CREATE TABLE nodes (job_id TEXT NOT NULL, node INTEGER NOT NULL, pid INTEGER, exit_code INTEGER,
    PRIMARY KEY (job_id, node));
CREATE TABLE restarts (job_id TEXT NOT NULL, attempt INTEGER NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (job_id, attempt));
CREATE TABLE remote_jobs (handle TEXT PRIMARY KEY, target TEXT NOT NULL, created_at REAL NOT NULL);
"""


def test_a_store_made_before_the_ledger_lists_its_jobs_with_the_new_columns(tmp_path, home):
    home.mkdir(mode=0o700)
    db = sqlite3.connect(home / "state.db")
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO jobs (id, provider, name, state, nodes, run_dir, created_at, started_at, ended_at) "
               "VALUES ('old-abc123', 'local', 'old', 'SUCCEEDED', 2, ?, 100.0, 110.0, 170.0)", (str(tmp_path),))
    db.execute("INSERT INTO restarts VALUES ('old-abc123', 1, 'node 1 exited with code 1', 150.0)")
    db.commit()
    db.close()
    (home / "state.db").chmod(0o600)
    rows = listed()
    row = rows["local://old-abc123"]
    assert (row["state"], row["nodes"], row["duration"], row["restarts"]) == ("SUCCEEDED", 2, 60.0, 1)
    assert "local://old-abc123" in run_cli("list", check=0).stdout
