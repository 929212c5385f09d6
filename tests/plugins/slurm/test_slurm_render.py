"""The slurm provider's render: the batch script exactly as sbatch reads it.

Option names and meanings are sbatch(1)'s (Slurm 22.05, Debian 12's slurm-wlm): the script is
handed to the real ``sbatch --test-only`` in tests/plugins/slurm/test_slurm_cluster.py; here it is
checked by shellcheck, and by running it under bash with a recording ``srun`` on PATH.
"""
import os
import shlex
import shutil
import stat
import subprocess

import pytest

from cloudtrain.extend.plugins import get_provider
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.request import Placeholder, fill
from cloudtrain.spec.errors import BadInput, JobFileError
from conftest import EXAMPLES, run_cli

BASE = {"name": "sj", "command": "python train.py --epochs 2", "distribution": {"type": "ddp", "nodes": 2},
        "env": {"OMP_NUM_THREADS": "1"}}
DIGEST = "ab" * 32
SPEC = "cd" * 32


def job(tmp_path=None, **overrides):
    data = {**BASE, **overrides}
    if tmp_path is not None:
        (tmp_path / "code").mkdir(exist_ok=True)
        (tmp_path / "code" / "train.py").write_text("print('hi')\n")
        data.setdefault("code", str(tmp_path / "code"))
    return job_from_dict(data)


def rendered(spec):
    return get_provider("slurm").render(spec)


def script_of(spec) -> str:
    request = fill(rendered(spec).request, {Placeholder.CODE_DIGEST: DIGEST, Placeholder.SPEC_HASH: SPEC})
    return str(request.script)


def directives(script: str):
    return [line[len("#SBATCH "):] for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_the_digits_example_renders_one_srun_of_the_launcher_on_every_node():
    proc = run_cli("render", "-p", "slurm", EXAMPLES / "digits-ddp" / "job.yaml", check=0)
    out = proc.stdout
    assert "#SBATCH --nodes=2" in out and "#SBATCH --ntasks-per-node=1" in out
    assert "#SBATCH --job-name=digits-ddp" in out
    srun = [line.strip() for line in out.splitlines() if line.strip().startswith("srun ")]
    assert len(srun) == 1
    assert "python3 -m cloudtrain.launch --platform slurm --type ddp --nproc-per-node 2" in srun[0]
    # the image is not silently dropped: the render and stderr say it is not used without containers
    assert "image cloudtrain/test-python:latest is not used" in out
    assert "providers.slurm.containers" in proc.stderr


def test_resources_time_and_placement_become_sbatch_options():
    spec = job(resources={"gpus_per_node": 8, "accelerator": "A100", "cpus_per_node": 31.5, "memory_gb": 1.5},
               max_runtime="1h30m", providers={"slurm": {"partition": "gpu", "account": "proj-1", "qos": "high",
                                                         "exclusive": True, "constraint": "ib"}})
    d = directives(script_of(spec))
    assert "--gpus-per-node=a100:8" in d
    assert "--cpus-per-task=32" in d
    assert "--mem=1536M" in d
    assert "--time=0-01:30:00" in d  # sbatch(1): days-hours:minutes:seconds
    for expected in ("--partition=gpu", "--account=proj-1", "--qos=high", "--exclusive", "--constraint=ib"):
        assert expected in d
    assert "--no-requeue" in d and not any(x.startswith("--signal") for x in d)
    assert f"--comment=cloudtrain:{SPEC}" in d


def test_gpu_type_overrides_the_accelerator_and_elastic_nodes_give_a_range():
    spec = job(resources={"gpus_per_node": 2, "accelerator": "A100"},
               distribution={"type": "ddp", "nodes": 4, "min_nodes": 2}, providers={"slurm": {"gpu_type": "a100_80g"}})
    d = directives(script_of(spec))
    assert "--gpus-per-node=a100_80g:2" in d and "--nodes=2-4" in d


def test_max_restarts_requeues_with_a_signal_and_counts_slurms_restarts():
    script = script_of(job(max_restarts=3))
    d = directives(script)
    assert "--requeue" in d and "--signal=TERM@120" in d and "--no-requeue" not in d
    assert 'export CLOUDTRAIN_RESTART_COUNT="${SLURM_RESTART_COUNT:-0}"' in script
    assert '"${SLURM_RESTART_COUNT:-0}" -gt 3' in script
    assert 'scontrol requeue "$SLURM_JOB_ID"' in script


def test_spot_needs_a_preemptible_partition_or_qos(tmp_path):
    with pytest.raises(JobFileError) as err:
        rendered(job(spot=True))
    assert "spot_partition" in str(err.value) and "spot_qos" in str(err.value)
    d = directives(script_of(job(spot=True, providers={"slurm": {"spot_partition": "preempt", "partition": "gpu"}})))
    assert "--partition=preempt" in d and "--partition=gpu" not in d
    d = directives(script_of(job(spot=True, providers={"slurm": {"spot_qos": "scavenger"}})))
    assert "--qos=scavenger" in d


def test_spot_without_a_preemptible_partition_is_exit_2_at_validate(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: sj\ncommand: python train.py\nspot: true\n")
    proc = run_cli("validate", "-p", "slurm", path)
    assert proc.returncode == 2
    assert "spot" in proc.stderr and "spot_partition" in proc.stderr


@pytest.mark.parametrize("option,value", [
    ("partition", "gpu\n#SBATCH --uid=0"), ("account", "a b"), ("qos", "q;rm -rf ~"),
    ("workdir", "jobs dir"), ("workdir", "jobs/%j"), ("workdir", "$(touch x)"), ("workdir", "../../etc"),
    ("login", "-oProxyCommand=touch /tmp/x"), ("login", "user@host bad"), ("python", "python3; rm -rf ~"),
])
def test_hostile_options_are_refused_at_their_field(option, value):
    with pytest.raises(BadInput) as err:
        rendered(job(providers={"slurm": {option: value}}))
    assert f"providers.slurm.{option}" in str(err.value)


def test_refused_neutral_fields_name_their_line():
    with pytest.raises(BadInput) as err:
        rendered(job(resources={"instance_type": "p4d.24xlarge"}))
    assert "resources.instance_type" in str(err.value)


def test_containers_pyxis_and_apptainer():
    pyxis = script_of(job(image="nvcr.io/nvidia/pytorch:24.01-py3", providers={"slurm": {"containers": "pyxis"}}))
    assert "--container-image='nvcr.io#nvidia/pytorch:24.01-py3'" in pyxis  # enroot's REGISTRY#IMAGE, quoted
    assert '--container-mounts="$workdir:$workdir"' in pyxis
    hub = script_of(job(image="pytorch/pytorch:2.3.0", providers={"slurm": {"containers": "pyxis"}}))
    assert "--container-image=pytorch/pytorch:2.3.0" in hub
    apptainer = script_of(job(image="pytorch/pytorch:2.3.0", providers={"slurm": {"containers": "apptainer"}}))
    assert 'apptainer exec --bind "$workdir" --pwd "$code_dir" docker://pytorch/pytorch:2.3.0 bash -c' in apptainer
    sif = script_of(job(image="/shared/images/train.sif", providers={"slurm": {"containers": "apptainer"}}))
    assert " /shared/images/train.sif bash -c" in sif


SHELLCHECKED = [
    {},
    {"max_restarts": 2, "max_runtime": "2h", "resources": {"gpus_per_node": 4, "memory_gb": 64}},
    {"image": "nvcr.io/nvidia/pytorch:24.01-py3", "providers": {"slurm": {"containers": "pyxis"}}},
    {"image": "pytorch/pytorch:2.3.0", "providers": {"slurm": {"containers": "apptainer", "workdir": "/scratch/ct"}}},
    {"storage": {"inputs": {"train": "/data/train"}, "output": "out/x", "checkpoint": "/ckpt/sj"},
     "providers": {"slurm": {"prelude": ["module load cuda/12.1", "source ~/venv/bin/activate"]}}},
]


@pytest.mark.parametrize("overrides", SHELLCHECKED)
def test_the_script_passes_shellcheck(overrides, tmp_path):
    path = tmp_path / "job.sbatch"
    path.write_text(script_of(job(**overrides)))
    done = subprocess.run(["shellcheck", "-s", "bash", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


HOSTILE = "it's $(touch pwned-env) `touch pwned-tick` \"q\" ; touch pwned-semi\nline2 \\ *"


def _recording_bin(tmp_path):
    """A PATH directory whose srun records its arguments and runs the node command as srun would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text('#!/bin/bash\nprintf "%s\\0" "$@" > "$RECORD"\nwhile [[ $1 == --* ]]; do\n'
                    '  case $1 in --chdir=*) cd "${1#--chdir=}" || exit 9 ;; esac\n  shift\ndone\nexec "$@"\n')
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_hostile_values_reach_the_nodes_as_they_are(tmp_path):
    """Run the rendered script under bash (a recording srun on PATH): an env value, a command
    argument and an output path full of shell syntax arrive byte for byte, and nothing runs."""
    spec = job(tmp_path, command=["python3", "-c", "import os,sys; print(repr(os.environ['HOSTILE'])); "
                                  "print(repr(sys.argv[1]))", HOSTILE],
               env={"HOSTILE": HOSTILE}, distribution={"type": "none", "nodes": 1},
               storage={"output": "out dir/$(touch pwned-out)"},
               providers={"slurm": {"workdir": str(tmp_path / "wd")}})
    provider = get_provider("slurm")
    r = provider.render(spec)
    data, digest = provider.code_archive(r)
    (tmp_path / "wd" / "cloudtrain-code").mkdir(parents=True)
    shutil.copy(data.path, tmp_path / "wd" / "cloudtrain-code" / f"{digest}.tar.gz")
    script = str(fill(r.request, {Placeholder.CODE_DIGEST: digest, Placeholder.SPEC_HASH: SPEC}).script)
    (tmp_path / "job.sbatch").write_text(script)
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    env = {"PATH": f"{_recording_bin(tmp_path)}:{os.environ['PATH']}", "SLURM_JOB_ID": "42",
           "SLURM_SUBMIT_DIR": str(tmp_path), "SLURM_JOB_NUM_NODES": "1", "SLURMD_NODENAME": "n1",
           "RECORD": str(tmp_path / "srun.args"), "HOME": str(tmp_path), "SLURM_NODEID": "0",
           "SLURM_JOB_NODELIST": "n1", "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1"}
    done = subprocess.run(["bash", str(tmp_path / "job.sbatch")], cwd=run_dir, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert repr(HOSTILE) in done.stdout.splitlines()  # the env value
    assert done.stdout.splitlines().count(repr(HOSTILE)) == 2  # and the command's argument
    for where in (tmp_path, run_dir, tmp_path / "wd" / "jobs" / "42" / "code"):
        assert not list(where.glob("pwned*")), list(where.glob("pwned*"))
    assert (tmp_path / "wd" / "jobs" / "42" / "out dir" / "$(touch pwned-out)").is_dir()
    assert (tmp_path / "wd" / "jobs" / "42" / "exit-code").read_text().strip() == "0"


def test_a_changed_archive_runs_nothing(tmp_path):
    """The script checks the archive's sha256 before it unpacks: another archive stops the job."""
    spec = job(tmp_path, distribution={"type": "none", "nodes": 1}, providers={"slurm": {"workdir": str(tmp_path)}})
    provider = get_provider("slurm")
    r = provider.render(spec)
    data, digest = provider.code_archive(r)
    (tmp_path / "cloudtrain-code").mkdir()
    (tmp_path / "cloudtrain-code" / f"{digest}.tar.gz").write_bytes(data.read_bytes() + b"tampered")
    (tmp_path / "job.sbatch").write_text(str(fill(r.request, {Placeholder.CODE_DIGEST: digest,
                                                              Placeholder.SPEC_HASH: SPEC}).script))
    env = {"PATH": f"{_recording_bin(tmp_path)}:{os.environ['PATH']}", "SLURM_JOB_ID": "7", "HOME": str(tmp_path),
           "SLURM_SUBMIT_DIR": str(tmp_path), "SLURM_JOB_NUM_NODES": "1", "RECORD": str(tmp_path / "srun.args")}
    done = subprocess.run(["bash", str(tmp_path / "job.sbatch")], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "sha256 differs" in done.stderr
    assert not (tmp_path / "srun.args").exists()


def test_the_secrets_are_in_no_render(tmp_path, monkeypatch):
    monkeypatch.setenv("CT_SLURM_SECRET", "s3cr3t-value")
    spec = job(secrets={"API_TOKEN": {"from_env": "CT_SLURM_SECRET"}})
    r = rendered(spec)
    assert "s3cr3t-value" not in r.to_json() and "s3cr3t-value" not in str(r.request.script)
    assert r.request.secrets == ("API_TOKEN",)


def test_render_quotes_the_workdir_and_names_where_the_script_goes():
    r = rendered(job(providers={"slurm": {"workdir": "/scratch/team-a/ct", "login": "alice@login1"}}))
    names = [a.name for a in r.artifacts]
    assert names == ["/scratch/team-a/ct/cloudtrain-code/<code-digest>.tar.gz",
                     "/scratch/team-a/ct/scripts/<spec-hash>.sbatch on alice@login1"]
    assert f"workdir={shlex.quote('/scratch/team-a/ct')}" in str(r.request.script)
