"""Shipping code to a cloud: the archive is reproducible and carries a launcher that runs."""
import io
import os
import subprocess
import sys
import tarfile

from cloudtrain.transfer import shipping
from cloudtrain.input.loading import load_job
from conftest import write_job


def make_job(tmp_path, command="python train.py --epochs 1"):
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("import os\nprint('rank', os.environ.get('RANK'))\n")
    (code / "pkg" / "util.py").write_text("X = 1\n")
    (code / ".git").mkdir()
    (code / ".git" / "HEAD").write_text("ref: main\n")
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    path = write_job(tmp_path, f"""
        name: ship
        code: code
        command: {command}
        distribution: {{type: ddp, nodes: 2, procs_per_node: 1}}
        """)
    return load_job(path)


def test_archive_is_reproducible_and_leaves_out_vcs_and_caches(tmp_path):
    job = make_job(tmp_path)
    first = shipping.archive(job).read_bytes()
    os.utime(job.code_path / "train.py", (1, 1))          # mtimes must not matter
    assert shipping.archive(job).read_bytes() == first
    names = tarfile.open(fileobj=io.BytesIO(first)).getnames()
    assert "train.py" in names and "pkg/util.py" in names
    assert ".cloudtrain/cloudtrain/launch/main.py" in names and ".cloudtrain/entry.sh" in names
    assert not [n for n in names if n.startswith(".git") or "__pycache__" in n]


def test_code_digest_follows_contents_only(tmp_path):
    job = make_job(tmp_path)
    before = shipping.code_digest(job)
    (job.code_path / "__pycache__" / "other.pyc").write_bytes(b"1")
    assert shipping.code_digest(job) == before
    (job.code_path / "train.py").write_text("print('changed')\n")
    assert shipping.code_digest(job) != before


def test_node_command_runs_the_shipped_launcher_from_the_staged_code(tmp_path):
    job = make_job(tmp_path)
    staged = shipping.stage(job, tmp_path / "staged")
    line = shipping.node_command(job, platform="local")
    assert line.startswith('PYTHONPATH=.cloudtrain"${PYTHONPATH:+:$PYTHONPATH}" python3 -m cloudtrain.launch')
    env = {"PATH": os.environ["PATH"], "CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "1",
           "CLOUDTRAIN_MASTER_ADDR": "10.1.2.3", "CLOUDTRAIN_MASTER_PORT": "29400",
           "CLOUDTRAIN_HOSTS": "10.1.2.3,10.1.2.4"}
    # the staged launcher alone (python -S: no site-packages, so not the installed cloudtrain)
    line = line.replace("python3 -m", f"{sys.executable} -S -m").replace(" -- ", " --print -- ", 1)
    proc = subprocess.run(["sh", "-c", line], cwd=staged, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--node-rank 1" in proc.stdout and "--nnodes 2" in proc.stdout
    assert "--master-addr 10.1.2.3" in proc.stdout
