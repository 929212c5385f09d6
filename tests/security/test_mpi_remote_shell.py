"""The node-shell corpus's mpi cases (issue 39, item 7): Open MPI's rsh launcher starts each other
node's daemon through ssh, with every MCA setting mpirun has (``OMPI_MCA_*`` from its environment,
``--mca`` words) on the remote command line inside double quotes.  Here ``plm_rsh_agent`` is a
stub named ssh that runs what it receives under sh, as a node's login shell would: real Open MPI,
real ``cloudtrain launch``, two "nodes" (the stub runs the second one's daemon on this machine).

A hostile value in an MCA variable the job sets is refused by the launcher (exit 2, the
variable named) before mpirun starts: nothing runs, no marker appears; a plain value goes through
and the job runs across both nodes."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_node_shell_corpus import markers, payload

SSH_STUB = """#!/bin/sh
# ssh HOST COMMAND...: what a node's login shell would get, run here under sh (the host ignored)
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
shift
printf '%s\\n' "$*" >> "$STUB_LOG"
exec sh -c "$*"
"""
MPIRUN = shutil.which("mpirun")


@pytest.fixture
def stub(tmp_path):
    path = tmp_path / "bin" / "ssh"
    path.parent.mkdir()
    path.write_text(SSH_STUB)
    path.chmod(0o755)
    return path


def node_env(tmp_path: Path, stub: Path, **mca) -> dict:
    """Node 0 of two (``nodea``, ``nodeb``), the launcher's generic variables; ``mca``: the job's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "CLOUDTRAIN_"))}
    env.update({"CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "0", "CLOUDTRAIN_HOSTS": "nodea,nodeb",
                "CLOUDTRAIN_MASTER_ADDR": "127.0.0.1", "CLOUDTRAIN_NPROC_PER_NODE": "1",
                "OMPI_MCA_plm_rsh_agent": str(stub), "OMPI_MCA_orte_keep_fqdn_hostnames": "1",
                "STUB_LOG": str(tmp_path / "ssh.log"), "OMP_NUM_THREADS": "1"})
    env.update(mca)
    return env


def launch(tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudtrain.launch", "--type", "mpi", "--",
                           sys.executable, "-c", "import os; print('rank-' + os.environ['OMPI_COMM_WORLD_RANK'])"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_open_mpi_hands_an_mca_value_to_the_remote_shell(tmp_path, stub):
    """Why: mpirun alone, a ``$(...)`` in an OMPI_MCA_ value runs in the other node's shell."""
    mark = tmp_path / "premise"
    env = node_env(tmp_path, stub, OMPI_MCA_btl_base_warn_component_unused=f"0$(touch {mark})")
    subprocess.run([MPIRUN, "--allow-run-as-root", "-np", "2", "-H", "nodea,nodeb", "true"], env=env,
                   cwd=tmp_path, capture_output=True, timeout=300)
    assert mark.exists()
    assert '-mca btl_base_warn_component_unused "0$(touch' in (tmp_path / "ssh.log").read_text()


@pytest.mark.parametrize("name", ["OMPI_MCA_btl_base_warn_component_unused", "PMIX_MCA_pmix_x", "PRTE_MCA_prte_x"])
def test_a_hostile_mca_value_is_refused_before_mpirun_starts(tmp_path, stub, name):
    mark = tmp_path / "ct-mark"
    proc = launch(tmp_path, node_env(tmp_path, stub, **{name: payload(mark)}))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("cloudtrain launch: ") and name in lines[0]
    assert markers(tmp_path, mark) == []
    assert not (tmp_path / "ssh.log").exists()  # no remote shell was asked for anything


@pytest.mark.parametrize("value", ["0$(touch M)", "0`touch M`", '0"; touch M; "', "0\\", "0\ntouch M", "0!x"])
def test_each_character_a_double_quoted_word_interprets_is_refused(tmp_path, stub, value):
    mark = tmp_path / "M"
    proc = launch(tmp_path, node_env(tmp_path, stub, OMPI_MCA_btl_base_warn_component_unused=value))
    assert proc.returncode == 2 and "OMPI_MCA_btl_base_warn_component_unused" in proc.stderr, proc.stderr
    assert not mark.exists() and not (tmp_path / "ssh.log").exists()


def test_a_plain_value_reaches_the_other_node_and_the_job_runs_there(tmp_path, stub):
    proc = launch(tmp_path, node_env(tmp_path, stub, OMPI_MCA_btl_base_warn_component_unused="0",
                                     OMPI_MCA_btl_tcp_if_exclude="docker0,virbr0 ;'x|y&*"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(re.findall(r"rank-(\d)", proc.stdout)) == ["0", "1"], proc.stdout
    sent = (tmp_path / "ssh.log").read_text()
    assert '-mca btl_tcp_if_exclude "docker0,virbr0 ;\'x|y&*"' in sent  # as the job gave it, quoted


def test_validate_refuses_a_hostile_mca_value_at_its_line(tmp_path):
    from conftest import run_cli, write_job
    path = write_job(tmp_path, """
        name: m
        command: python t.py
        distribution: {type: mpi, nodes: 2}
        env:
          OMP_NUM_THREADS: "1"
          OMPI_MCA_btl_tcp_if_exclude: "lo$(touch x)"
        """)
    proc = run_cli("validate", path)
    assert proc.returncode == 2
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("cloudtrain: error:")]
    assert f"{path}:4: env: OMPI_MCA_btl_tcp_if_exclude:" in line
