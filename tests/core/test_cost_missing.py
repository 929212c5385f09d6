"""issue 44 item 6: a cost that is missing says why and how to get it.

- ``cloudtrain list`` prints, under its table, one ``COST -:`` line per provider whose jobs ran
  without a cost: the instance types the catalog has no price for, the catalog's own note, and
  ``cloudtrain catalog refresh -p PROVIDER``; the dashboard's data carries the same reasons.
- ``cloudtrain resources`` lists CPU-only types too (TI-ONE's ``TI.S.*``), unless a GPU is asked for.
- a made-up instance type (not in the provider's catalog) is a warning at ``validate``, at the
  field's line, not only ``estimate: none``.
"""
from __future__ import annotations

import json
import time

import pytest

from cloudtrain.commands.cli import main
from conftest import run_cli, write_job


def put(handle, *, instance_type=None, rate=None, started=True, state="SUCCEEDED", nodes=2, local=False):
    from cloudtrain.runtime.store import Store
    provider, job_id = handle.split("://", 1)
    now = time.time()
    Store().ledger_put({
        "handle": handle, "provider": provider, "job_id": job_id, "name": job_id, "instance_type": instance_type,
        "nodes": nodes, "spot": 0, "rate": rate, "currency": "USD" if rate else None,
        "submitted_at": now - 7200, "started_at": now - 3600 if started else None,
        "ended_at": now - 60 if started else None, "state": state if started else "CANCELLED",
        "refreshed_at": now, "local": int(local)})


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_says_under_its_table_why_a_cost_is_missing_and_how_to_get_it(home, capsys):
    put("sagemaker://us-east-1/a-1", instance_type="ml.g5.xlarge")
    put("sagemaker://us-east-1/a-2", instance_type="ml.p4d.24xlarge")
    put("tione://ap-shanghai/t-1", instance_type="TI.GN10.2XLARGE40.POST")
    put("kubeflow://default/k-1")
    put("modelarts://cn-north-4/m-1", instance_type="modelarts.vm.cpu.8u")
    put("ec2://us-east-1/priced", instance_type="g5.xlarge", rate=1.006)
    put("sagemaker://us-east-1/never-started", instance_type="ml.g5.2xlarge", started=False)
    code, out, err = cli(capsys, "list")
    assert code == 0
    table = out.splitlines()
    assert table[0].split()[0] == "HANDLE" and len(table) == 8       # the table itself is unchanged
    assert not any(line.startswith("COST") for line in table)          # the footnote is not a row
    notes = [line for line in err.splitlines() if line.startswith("COST -:")]
    assert len(notes) == 4, err                                        # sagemaker, tione, kubeflow, modelarts
    sagemaker = next(n for n in notes if "sagemaker" in n)
    assert "2 sagemaker jobs" in sagemaker                             # not the one that never started
    assert "ml.g5.xlarge" in sagemaker and "ml.p4d.24xlarge" in sagemaker and "ml.g5.2xlarge" not in sagemaker
    assert "cloudtrain catalog refresh -p sagemaker" in sagemaker
    tione = next(n for n in notes if "tione" in n)
    assert "TI.GN10.2XLARGE40.POST" in tione and "catalog refresh -p tione" in tione
    kubeflow = next(n for n in notes if "kubeflow" in n)
    assert "no instance catalog" in kubeflow and "refresh" not in kubeflow
    modelarts = next(n for n in notes if "modelarts" in n)
    # its catalog says a refresh reads no price (Huawei's rating API needs an unpublished spec): not suggested
    assert "modelarts.vm.cpu.8u" in modelarts and "not listed" in modelarts and "refresh" not in modelarts
    assert not any("ec2" in n for n in notes)                         # it has a cost


def test_list_prints_no_footnote_when_every_cost_is_known_or_not_due(home, capsys):
    put("ec2://us-east-1/priced", instance_type="g5.xlarge", rate=1.006)
    put("sagemaker://us-east-1/queued", instance_type="ml.g5.xlarge", started=False)
    put("local://here-1", local=True)                                # runs here: no price to miss
    code, out, err = cli(capsys, "list")
    assert code == 0 and "COST" not in err, err


def test_a_job_without_an_instance_type_on_a_catalogued_provider_names_the_setting(home, capsys):
    put("azure://ws/cluster-sized")
    _, _, err = cli(capsys, "list")
    note = next(line for line in err.splitlines() if line.startswith("COST -:"))
    assert "1 azure job" in note and "without an instance type" in note and "providers.azure." in note


def test_the_dashboard_data_says_why_too(home):
    from cloudtrain.ui import data
    put("sagemaker://us-east-1/a-1", instance_type="ml.g5.xlarge")
    put("ec2://us-east-1/priced", instance_type="g5.xlarge", rate=1.006)
    jobs = data.jobs()
    assert set(jobs["cost_missing"]) == {"sagemaker"}
    assert "catalog refresh -p sagemaker" in jobs["cost_missing"]["sagemaker"]
    costs = data.costs()
    assert costs["unpriced"] == {"sagemaker": 1}
    assert set(costs["unpriced_why"]) == {"sagemaker"} and "ml.g5.xlarge" in costs["unpriced_why"]["sagemaker"]
    json.dumps(jobs), json.dumps(costs)                               # the web app sends them as JSON


# -- resources: CPU-only types ------------------------------------------------------------------
def test_resources_lists_cpu_only_types_unless_a_gpu_is_asked_for(capsys):
    code, out, _ = cli(capsys, "resources", "-p", "tione")
    assert code == 0
    rows = [line.split() for line in out.splitlines()[1:]]
    cpu = [r for r in rows if r[1].startswith("TI.S.")]
    assert cpu and all(r[2] == "-" for r in cpu)                      # ACCELERATOR -: a CPU spec
    assert any(r[1].startswith("TI.GN") for r in rows)                # and the GPU ones still
    _, out, _ = cli(capsys, "resources", "-p", "tione", "--gpus", "0")
    assert {line.split()[1][:5] for line in out.splitlines()[1:]} == {"TI.S."}
    _, out, _ = cli(capsys, "resources", "-p", "tione", "--accelerator", "V100")
    assert "TI.S." not in out
    _, out, _ = cli(capsys, "resources", "-p", "tione", "-o", "json")
    assert any(r["instance_type"].startswith("TI.S.") and r["accelerator"] is None for r in json.loads(out))


# -- a made-up instance type -------------------------------------------------------------------
@pytest.mark.parametrize("provider, field, name, gpus", [
    ("sagemaker", "providers.sagemaker.instance_type", "ml.p9.madeup", 8),
    ("ec2", "resources.instance_type", "p9.madeup", 8),
    ("tione", "providers.tione.instance_type", "TI.S.MADEUP.POST", None),   # its catalog lists CPU specs too
])
def test_validate_warns_at_the_line_of_an_instance_type_not_in_the_catalog(tmp_path, home, provider, field, name,
                                                                           gpus):
    head, _, key = field.rpartition(".")
    section = f"resources:\n  {key}: {name}\n" if head == "resources" else \
        f"providers:\n  {provider}:\n    {key}: {name}\n"
    if gpus:
        section += f"{'' if head == 'resources' else 'resources:'}\n  gpus_per_node: {gpus}\n".lstrip("\n")
    job = write_job(tmp_path, f"name: made-up\ncommand: python train.py\n{section}")
    line = job.read_text().splitlines().index(f"{'    ' if head != 'resources' else '  '}{key}: {name}") + 1
    proc = run_cli("validate", "-p", provider, job, "--set", f"providers.{provider}.region=us-east-1"
                   if provider != "tione" else "providers.tione.region=ap-shanghai")
    warning = [w for w in proc.stderr.splitlines() if w.startswith("cloudtrain: warning:") and name in w]
    assert len(warning) == 1, proc.stderr                             # said once, however often it is asked
    assert warning[0].startswith(f"cloudtrain: warning: {job}:{line}: {field}: {name} is not in {provider}'s catalog")
    assert f"cloudtrain resources -p {provider}" in warning[0]


@pytest.mark.parametrize("provider, section", [
    ("ec2", "resources:\n  instance_type: g5.xlarge\n"),                               # listed
    ("sagemaker", "providers:\n  sagemaker:\n    instance_type: ml.m5.xlarge\n"),     # a CPU type; the catalog
])                                                                                     # lists GPU types only
def test_a_type_the_catalog_has_or_cannot_have_is_not_warned_about(tmp_path, home, provider, section):
    job = write_job(tmp_path, f"name: known\ncommand: python train.py\n{section}")
    proc = run_cli("validate", "-p", provider, job, "--set", f"providers.{provider}.region=us-east-1")
    assert "catalog of" not in proc.stderr, proc.stderr
