"""ModelArts node environments, both ways: the detectors (shipped into nodes, stdlib only) and the
emulated environments; seed 001's start line really run by bash with the shipped launcher."""
import ast
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cloudtrain.launch import detectors
from cloudtrain.input.loading import job_from_dict
from cloudtrain_modelarts import detect
from cloudtrain_modelarts.lite import LiteOptions
from cloudtrain_modelarts.render import start_line

DETECT = Path(detect.__file__)

# ModelArts Standard, 4 nodes x 8 cards, as the docs list the variables (platforms.md 3.3).
STANDARD = {
    "MA_NUM_HOSTS": "4", "VC_TASK_INDEX": "2", "VC_WORKER_NUM": "4", "MA_NUM_GPUS": "8",
    "MA_TASK_NAME": "worker", "MA_CURRENT_IP": "172.16.0.12",
    "VC_WORKER_HOSTS": "modelarts-job-a1-worker-0.modelarts-job-a1,modelarts-job-a1-worker-1.modelarts-job-a1,"
                       "modelarts-job-a1-worker-2.modelarts-job-a1,modelarts-job-a1-worker-3.modelarts-job-a1",
    "CLOUDTRAIN_MASTER_PORT": "29500",
}
PODS = [f"vcjob-worker-{i}.vcjob" for i in range(6)]


def lite(index, rank, master_index="0", **extra):
    """A Lite pod after seed 001's start line: 6 pods of task worker."""
    env = {"VC_TASK_INDEX": str(index), "VK_TASK_INDEX": str(index), "VC_WORKER_HOSTS": ",".join(PODS),
           "VC_WORKER_NUM": "6", "MA_NUM_HOSTS": "6", "MA_NUM_GPUS": "8", "MA_VJ_NAME": "vcjob",
           "MA_TASK_NAME": "worker", "RANK_AFTER_ACC": str(rank), "MA_MASTER_INDEX": master_index,
           "CLOUDTRAIN_MASTER_PORT": "39888"}
    env.update(extra)
    return env


def test_standard_environment_from_the_docs():
    topo = detect.detect_standard(STANDARD)
    assert (topo.platform, topo.node_rank, topo.num_nodes, topo.nproc_per_node) == ("modelarts", 2, 4, 8)
    assert topo.master_addr == "modelarts-job-a1-worker-0.modelarts-job-a1"  # ${VC_WORKER_HOSTS%%,*}
    assert topo.hosts == STANDARD["VC_WORKER_HOSTS"].split(",") and topo.master_port == 29500


def test_standard_single_node_cpu_flavor():
    topo = detect.detect_standard({"MA_NUM_HOSTS": "1", "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "0",
                                   "MA_CURRENT_IP": "10.0.0.3"})
    assert (topo.num_nodes, topo.master_addr, topo.hosts, topo.nproc_per_node) == (1, "10.0.0.3", ["10.0.0.3"], None)


def test_standard_inconsistent_host_list_is_an_error():
    with pytest.raises(ValueError, match="MA_NUM_HOSTS=3 but VC_WORKER_HOSTS lists 4"):
        detect.detect_standard(dict(STANDARD, MA_NUM_HOSTS="3"))
    with pytest.raises(ValueError, match="no VC_WORKER_HOSTS"):
        detect.detect_standard({"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1"})


def test_lite_node_rank_follows_rank_after_acc_and_master_follows_master_index():
    # Routing renumbered the pods: pod 4 is now rank 0, so every pod's MA_MASTER_INDEX is 4.
    topo = detect.detect_lite(lite(index=1, rank=3, master_index="4", CLOUDTRAIN_RANK_ROUTED="1"))
    assert (topo.platform, topo.node_rank, topo.num_nodes) == ("modelarts-lite", 3, 6)
    assert topo.master_addr == "vcjob-worker-4.vcjob" and topo.master_port == 39888
    assert topo.hosts == []  # one pod cannot know the others' new ranks
    master = detect.detect_lite(lite(index=4, rank=0, master_index="4"))
    assert (master.node_rank, master.master_addr) == (0, "vcjob-worker-4.vcjob")


def test_lite_a_pod_that_keeps_its_index_still_sees_the_routed_job():
    topo = detect.detect_lite(lite(index=2, rank=2, master_index="4", CLOUDTRAIN_RANK_ROUTED="1"))
    assert (topo.node_rank, topo.master_addr, topo.hosts) == (2, "vcjob-worker-4.vcjob", [])


def test_lite_without_routing_keeps_volcanos_order():
    topo = detect.detect_lite(lite(index=5, rank=5))
    assert (topo.node_rank, topo.master_addr, topo.hosts, topo.nproc_per_node) == (5, PODS[0], PODS, 8)


def test_lite_master_from_seed_001s_naming_without_a_host_list():
    env = lite(index=1, rank=2, master_index="3")
    del env["VC_WORKER_HOSTS"]
    topo = detect.detect_lite(env)
    # MASTER_ADDR="${MA_VJ_NAME}-${MA_TASK_NAME}-${MA_MASTER_INDEX}.${MA_VJ_NAME}"
    assert topo.master_addr == "vcjob-worker-3.vcjob" and topo.node_rank == 2


def test_lite_bad_master_index_is_an_error():
    with pytest.raises(ValueError, match="MA_MASTER_INDEX=6 is outside 0..5"):
        detect.detect_lite(lite(index=0, rank=0, master_index="6"))


def test_each_detector_claims_only_its_own_platform():
    assert detect.detect_lite(STANDARD) is None
    assert detect.detect_standard(lite(0, 0)) is None
    assert detect.detect_lite({"VC_TASK_INDEX": "0", "VC_WORKER_HOSTS": "a,b"}) is None  # plain Volcano
    assert detect.detect_standard({"VC_TASK_INDEX": "0", "VC_WORKER_HOSTS": "a,b"}) is None


def test_auto_detection_through_the_installed_entry_points():
    assert detectors.detect(lite(1, 3, "4")).platform == "modelarts-lite"
    assert detectors.detect(STANDARD).platform == "modelarts"


@pytest.mark.parametrize("order", [None, [2, 0, 1, 5, 3, 4]])
def test_emulated_lite_environment_round_trips(order):
    hosts = [f"h{i}" for i in range(6)]
    for pod in range(6):
        env = detect.lite_environment("vcjob", 6, pod, hosts, 23456, 8, order)
        topo = detect.detect_lite(env)
        assert topo.node_rank == (order[pod] if order else pod)
        assert topo.master_addr == (hosts[order.index(0)] if order else "h0")
        assert topo.hosts == ([] if order else hosts)


def test_emulated_renumbering_must_be_a_permutation():
    with pytest.raises(ValueError, match="permutation of 0..2"):
        detect.lite_environment("j", 3, 0, ["a", "b", "c"], 1, 0, [0, 0, 1])


def test_detector_module_is_standard_library_only_and_py37_grammar():
    tree = ast.parse(DETECT.read_text(), feature_version=(3, 7))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "re", "typing", "cloudtrain"}
    assert "cloudtrain_modelarts" not in (Path(detect.__file__).parent / "__init__.py").read_text().split('"""')[-1]


# -- seed 001's start line, run by bash with the shipped launcher ------------------------------------
BOOTSTRAP = """#!/bin/bash
# stands in for ${OPEN_SCRIPT_ADDRESS}/bootstrap.sh: routing moved this pod to rank $NEW_RANK
[ -n "$NEW_RANK" ] && echo "$NEW_RANK" > TMPDIR/RANK_AFTER_ACC && echo 4 > TMPDIR/MASTER_INDEX
true
"""


def run_start_line(tmp_path, routing, index, new_rank=None):
    job = job_from_dict({"name": "vcjob", "command": "python train.py --epochs 1", "code": None,  # no unpack step here
                         "distribution": {"type": "ddp", "nodes": 6}, "resources": {"gpus_per_node": 8}})
    options = LiteOptions(python=sys.executable, routing=routing, accelerator="ascend")  # as options(job) resolves it
    tmp = tmp_path / f"tmp-{index}"
    tmp.mkdir()
    (tmp_path / "bootstrap.sh").write_text(BOOTSTRAP.replace("TMPDIR", str(tmp)))
    line = start_line(job, options)
    # No network and no shared /tmp in a test: the download is a copy, /tmp is private, and the
    # launcher only prints the command it would exec.
    # (only the seed's two files move: the Python running the tests may itself live under /tmp)
    for name in ("RANK_AFTER_ACC", "MASTER_INDEX"):
        line = line.replace(f"/tmp/{name}", f"{tmp}/{name}")
    line = line.replace("-m cloudtrain.launch", "-m cloudtrain.launch --print")
    line = line.replace('wget "${OPEN_SCRIPT_ADDRESS}/bootstrap.sh" -q', f"cp {tmp_path}/bootstrap.sh bootstrap.sh")
    assert line.count(str(tmp)) == (2 if routing else 0)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MA_", "VC_", "CLOUDTRAIN_", "RANK"))}
    env.update(detect.lite_environment("vcjob", 6, index, PODS, 39888, 8))
    for key in ("RANK_AFTER_ACC", "MA_MASTER_INDEX"):  # the start line sets these, not the platform
        env.pop(key)
    env["CLOUDTRAIN_DETECTORS"] = "modelarts-lite=cloudtrain_modelarts.detect:detect_lite"
    if new_rank is not None:
        env["NEW_RANK"] = str(new_rank)
    work = tmp_path / f"work-{index}"
    work.mkdir()
    proc = subprocess.run(["/bin/bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return shlex.split(proc.stdout.strip().splitlines()[-1])


def test_start_line_applies_routings_renumbering(tmp_path):
    argv = run_start_line(tmp_path, routing=True, index=1, new_rank=3)
    assert argv[argv.index("--node-rank") + 1] == "3"
    assert argv[argv.index("--master-addr") + 1] == "vcjob-worker-4.vcjob"
    assert argv[argv.index("--master-port") + 1] == "39888"
    assert argv[argv.index("--nnodes") + 1] == "6" and argv[argv.index("--nproc-per-node") + 1] == "8"


def test_start_line_without_routing_output_keeps_the_pod_index(tmp_path):
    argv = run_start_line(tmp_path, routing=True, index=2)  # bootstrap wrote nothing (e.g. < 3 nodes)
    assert argv[argv.index("--node-rank") + 1] == "2"
    assert argv[argv.index("--master-addr") + 1] == "vcjob-worker-0.vcjob"


def test_start_line_with_routing_off_never_downloads(tmp_path):
    job = job_from_dict({"name": "g", "command": "python t.py", "resources": {"gpus_per_node": 8}})
    line = start_line(job, LiteOptions(accelerator="gpu"))
    assert "wget" not in line and "bootstrap" not in line
    argv = run_start_line(tmp_path, routing=False, index=5, new_rank=0)
    assert argv[argv.index("--node-rank") + 1] == "5"
