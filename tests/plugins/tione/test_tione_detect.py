"""TI-ONE's node environment (seed 000's tables, per training mode) -> the neutral topology.

The DDP cases live in tests/contract/platform_cases.py (key ``tione``), where the ``fakeone``
test double shares them; the other modes are pinned here as (environ, expected) cases of the
same shape.
"""
import json
import os
import subprocess
import sys

import pytest

from cloudtrain.launch import detectors
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.provider import Cluster
from conftest import SUPPORT

from cloudtrain_tione import detect as td
from cloudtrain_tione.provider import TioneProvider

PS_CONFIG = {"cluster": {"ps": ["train-960252492096760832-7an13ppfli80-ps-0.train-100031385875.svc:2222",
                                "train-960252492096760832-7an13ppfli80-ps-1.train-100031385875.svc:2222"],
                         "worker": ["train-960252492096760832-7an13ppfli80-worker-0.train-100031385875.svc:2222",
                                    "train-960252492096760832-7an13ppfli80-worker-1.train-100031385875.svc:2222"]},
             "task": {"type": "ps", "index": 0}, "environment": "cloud"}
PS_HOSTS = [a.rsplit(":", 1)[0] for a in PS_CONFIG["cluster"]["ps"] + PS_CONFIG["cluster"]["worker"]]
MPI_ENV = {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "GPU_NUM": "2", "GPU_NUM_PER_NODE": "1",
           "NODE_IP_SLOT_LIST": "9.0.255.56:1,9.0.255.118:1"}
RAY_HEAD = "train-1282671078021627392-9qu5j2n90b9c-head-0"

MODE_CASES = [
    # MPI / Horovod: the IP:slots list names the nodes; INDEX (a common variable) says which one this is
    (dict(MPI_ENV, INDEX="1"),
     {"node_rank": 1, "num_nodes": 2, "hosts": ["9.0.255.56", "9.0.255.118"], "master_addr": "9.0.255.56",
      "master_port": 29500, "nproc_per_node": 1, "hostfile": "/etc/mpi/hostfile", "slots": None}),
    (dict(MPI_ENV, INDEX="0", CLOUDTRAIN_MASTER_PORT="29600"),
     {"node_rank": 0, "master_port": 29600, "master_addr": "9.0.255.56"}),
    # PS-Worker: TF_CONFIG is kept as the platform wrote it; ps nodes first, then workers
    ({"TF_CONFIG": json.dumps(PS_CONFIG)},
     {"node_rank": 0, "num_nodes": 4, "hosts": PS_HOSTS, "master_addr": PS_HOSTS[0], "tf_config": PS_CONFIG}),
    ({"TF_CONFIG": json.dumps(dict(PS_CONFIG, task={"type": "worker", "index": 1}))},
     {"node_rank": 3, "num_nodes": 4, "hosts": PS_HOSTS}),
    # Ray: HEAD_ADDR / HEAD_PORT (6379) / RANK (0 = head)
    ({"HEAD_ADDR": RAY_HEAD, "HEAD_PORT": "6379", "RANK": "0"},
     {"node_rank": 0, "num_nodes": 1, "master_addr": RAY_HEAD, "master_port": 6379,
      "env": {"RAY_ADDRESS": f"{RAY_HEAD}:6379"}}),
    # Issue 21 #4: without NODE_LIST the head (RANK 0) learns the node count from the request's
    # CLOUDTRAIN_TIONE_NODES (seed 000 lines 75-78 list no count), not from rank + 1
    ({"HEAD_ADDR": RAY_HEAD, "HEAD_PORT": "6379", "RANK": "0", "CLOUDTRAIN_TIONE_NODES": "3"},
     {"node_rank": 0, "num_nodes": 3, "master_addr": RAY_HEAD, "hosts": []}),
    ({"HEAD_ADDR": RAY_HEAD, "HEAD_PORT": "6379", "RANK": "2", "NODE_LIST": f"{RAY_HEAD}:1,w-0:1,w-1:1", "INDEX": "2"},
     {"node_rank": 2, "num_nodes": 3, "hosts": [RAY_HEAD, "w-0", "w-1"], "master_port": 6379}),
    # DDP with RDMA: the NCCL preset of seed 000 goes into Topology.env
    ({"NODE_LIST": "a:8,b:8", "INDEX": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "23456", "WORLD_SIZE": "2",
      "RANK": "1", "GPU_NUM": "16", "GPU_NUM_PER_NODE": "8", "CLOUDTRAIN_TIONE_RDMA": "1"},
     {"node_rank": 1, "num_nodes": 2, "nproc_per_node": 8, "env": td.NCCL_PRESET}),
]


@pytest.mark.parametrize("environ,expected", MODE_CASES)
def test_mode_cases(environ, expected):
    topo = TioneProvider.detect(environ)
    assert topo is not None and topo.platform == "tione"
    for field, value in expected.items():
        assert getattr(topo, field) == value, f"{field}: {getattr(topo, field)!r} != {value!r}"


def test_nccl_preset_is_seed_000s():
    assert td.NCCL_PRESET["NCCL_IB_GID_INDEX"] == "3" and td.NCCL_PRESET["NCCL_IB_HCA"] == "mlx5_bond"
    assert td.NCCL_PRESET["NCCL_NET_GDR_LEVEL"] == "2" and td.NCCL_PRESET["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    assert td.NCCL_PRESET["NCCL_IB_TC"] == "160" and td.NCCL_PRESET["NCCL_IB_TIMEOUT"] == "24"
    assert td.NCCL_PRESET["NCCL_SOCKET_IFNAME"] == td.NCCL_PRESET["GLOO_SOCKET_IFNAME"] == "eth0"
    assert len(td.NCCL_PRESET) == 17


def test_mpi_node_from_the_hostfile_and_host_name(tmp_path, monkeypatch):
    hostfile = tmp_path / "hostfile"
    # the seed's example, with both entries on one line as printed there
    hostfile.write_text("train-960258573108964736-7an39bddmfpc-launcher slots=1 "
                        "train-960258573108964736-7an39bddmfpc-worker-0 slots=1\n")
    env = {"OMPI_MCA_orte_default_hostfile": str(hostfile), "GPU_NUM": "2", "GPU_NUM_PER_NODE": "1"}
    monkeypatch.setattr(td.socket, "gethostname", lambda: "train-960258573108964736-7an39bddmfpc-worker-0")
    monkeypatch.setattr(td.socket, "gethostbyname", lambda name: "10.9.9.9")
    topo = td.detect(env)
    assert (topo.node_rank, topo.num_nodes, topo.hostfile) == (1, 2, str(hostfile))
    assert topo.hosts == ["train-960258573108964736-7an39bddmfpc-launcher",
                          "train-960258573108964736-7an39bddmfpc-worker-0"]
    # with the IP list only (no readable hostfile), the node is found by its address
    monkeypatch.setattr(td.socket, "gethostname", lambda: "somewhere-else")
    monkeypatch.setattr(td.socket, "gethostbyname", lambda name: "9.0.255.118")
    no_file = dict(env, OMPI_MCA_orte_default_hostfile=str(tmp_path / "missing"))
    assert td.detect(dict(no_file, NODE_IP_SLOT_LIST="9.0.255.56:1,9.0.255.118:1")).node_rank == 1
    # Horovod runs the command on the Launcher only
    monkeypatch.setattr(td.socket, "gethostname", lambda: "train-1-x-launcher")
    monkeypatch.setattr(td.socket, "gethostbyname", lambda name: "10.9.9.9")
    assert td.detect(dict(env, NODE_IP_SLOT_LIST="9.0.255.56:1,9.0.255.118:1")).node_rank == 0
    monkeypatch.setattr(td.socket, "gethostname", lambda: "nobody")
    with pytest.raises(ValueError, match="cannot tell which TI-ONE MPI node this is"):
        td.detect(dict(env, NODE_IP_SLOT_LIST="9.0.255.56:1,9.0.255.118:1"))


def test_mpi_node_0_is_the_hostfiles_launcher(tmp_path):
    """Issue 21 #6.  Seed 000: MPI/Horovod jobs have a Launcher and Workers (line 42); in Horovod
    mode only the Launcher runs the start command, the Workers `sleep infinity` (line 43); the
    hostfile names them (line 54: ``<task>-launcher slots=1 <task>-worker-0 slots=1``); INDEX is
    the index in NODE_LIST (line 18).  Node 0 -- the node that runs mpirun -- must be the
    Launcher on every node, whatever order NODE_LIST or NODE_IP_SLOT_LIST have."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("train-9-abc-worker-0 slots=1\ntrain-9-abc-worker-1 slots=1\ntrain-9-abc-launcher slots=1\n")
    node_list = ["train-9-abc-worker-1", "train-9-abc-launcher", "train-9-abc-worker-0"]
    base = {"OMPI_MCA_orte_default_hostfile": str(hostfile), "GPU_NUM": "3", "GPU_NUM_PER_NODE": "1",
            "NODE_IP_SLOT_LIST": "9.0.0.2:1,9.0.0.3:1,9.0.0.1:1",
            "NODE_LIST": ",".join(f"{h}.train-100.svc.cluster.local:1" for h in node_list)}
    order = ["train-9-abc-launcher", "train-9-abc-worker-0", "train-9-abc-worker-1"]
    seen = {}
    for index, name in enumerate(node_list):
        topo = td.detect(dict(base, INDEX=str(index)))
        assert topo.hosts == order and topo.master_addr == "train-9-abc-launcher", index
        seen[name] = topo.node_rank
    assert seen == {name: i for i, name in enumerate(order)}  # one node 0 -- the Launcher -- and no clash


def test_parsers():
    assert td.parse_slot_list("9.0.255.56:1, 9.0.255.118:2") == [("9.0.255.56", 1), ("9.0.255.118", 2)]
    with pytest.raises(ValueError):
        td.parse_slot_list("9.0.255.56")
    assert td.parse_hostfile("# c\nh0 slots=2 max_slots=4\nh1\n") == [("h0", 2), ("h1", 1)]


@pytest.mark.parametrize("environ", [
    {},
    # Kubeflow's TFJob writes the same TF_CONFIG shape, without TI-ONE's pod names or NODE_LIST
    {"TF_CONFIG": json.dumps({"cluster": {"ps": ["tf-ps-0.ns.svc:2222"], "worker": ["tf-worker-0.ns.svc:2222"]},
                              "task": {"type": "ps", "index": 0}, "environment": "cloud"})},
    # the MPI operator's hostfile variable alone
    {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"},
    # a PyTorchJob pod: WORLD_SIZE and RANK, but no NODE_LIST
    {"MASTER_ADDR": "pj-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1", "PET_NNODES": "2"},
    {"CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "1"},
])
def test_not_tione(environ):
    assert td.detect(environ) is None


def job(kind, nodes, **extra):
    data = {"name": "rt", "command": "python t.py", "distribution": {"type": kind, "nodes": nodes}}
    data["distribution"].update(extra)
    return job_from_dict(data)


@pytest.mark.parametrize("kind,nodes,extra", [
    ("ddp", 3, {"procs_per_node": 2}), ("deepspeed", 2, {}), ("none", 1, {}), ("mpi", 3, {"procs_per_node": 2}),
    ("horovod", 2, {}), ("ps-worker", 4, {"ps": 2}), ("ray", 3, {})])
@pytest.mark.parametrize("local", [False, True])
def test_environment_detect_round_trip_every_mode(kind, nodes, extra, local):
    j = job(kind, nodes, **extra)
    hosts = ["127.0.0.1"] * nodes if local else [f"train-1-x-worker-{i}" for i in range(nodes)]
    cluster = Cluster(hosts=hosts, master_port=41000)
    configs = []
    for index in range(nodes):
        env = TioneProvider.environment(j, index, cluster)
        topo = TioneProvider.detect(env)
        assert (topo.platform, topo.node_rank, topo.num_nodes) == ("tione", index, nodes)
        # Ray: seed 000's table lists no nodes (HEAD_ADDR, HEAD_PORT, RANK), so no host list
        assert topo.hosts == ([] if kind == "ray" and nodes > 1 else hosts) and topo.master_port == 41000
        auto = detectors.detect(dict(env, CLOUDTRAIN_DETECTORS=f"tione={TioneProvider.detector_target()}"))
        assert (auto.platform, auto.node_rank) == ("tione", index)
        if kind == "ps-worker":
            configs.append(topo.tf_config)
    if configs:  # one address per task; distinct even when every emulated node is 127.0.0.1
        addrs = configs[0]["cluster"]["ps"] + configs[0]["cluster"]["worker"]
        assert len(set(addrs)) == nodes
        assert [c["task"] for c in configs] == [{"type": "ps", "index": 0}, {"type": "ps", "index": 1},
                                                {"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
        assert all(a.endswith(":2222") for a in addrs) == (not local)


def launch(env, *args):
    """``cloudtrain launch`` in a clean environment holding only ``env`` (plus PATH, led by the
    interpreter's folder: a bare ``python`` stays as written whatever the caller's PATH holds)."""
    base = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
            "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(SUPPORT)}
    proc = subprocess.run([sys.executable, "-m", "cloudtrain", "launch", *args], capture_output=True, text=True,
                          env=dict(base, **env), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


SEED_DDP = {"NODE_LIST": "timaker-xxxyyy-launcher.training-job.svc.cluster.local:1,"
                         "timaker-xxxyyy-worker-0.training-job.svc.cluster.local:1",
            "INDEX": "1", "MASTER_ADDR": "10.35.110.11", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1",
            "GPU_NUM": "2", "GPU_NUM_PER_NODE": "1"}


def test_launch_print_under_a_tione_ddp_environment():
    """Seed 000's DDP node 1: WORLD_SIZE=2 nodes, RANK=1 node, one GPU per node -> torchrun's flags."""
    line = launch(SEED_DDP, "--print", "--", "python", "train.py", "--epochs", "5")
    assert line == ("python -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --node-rank 1 "
                    "--master-addr 10.35.110.11 --master-port 23456 --tee 3 train.py --epochs 5")
    eight = dict(SEED_DDP, NODE_LIST="a:8,b:8,c:8,d:8", WORLD_SIZE="4", RANK="0", INDEX="0", GPU_NUM_PER_NODE="8")
    line = launch(eight, "--print", "--platform", "tione", "--", "python", "train.py")
    assert "--nnodes 4 --nproc-per-node 8 --node-rank 0 --master-addr 10.35.110.11 --master-port 23456" in line
    # what the rendered start command passes wins over the platform's GPU count
    line = launch(SEED_DDP, "--print", "--platform", "tione", "--type", "ddp", "--nproc-per-node", "2", "--",
                  "python", "train.py")
    assert "--nnodes 2 --nproc-per-node 2 --node-rank 1" in line


def test_launch_print_under_tione_mpi_and_ray():
    # --platform tione, as the rendered start command says: auto-detection may ask another
    # platform's detector first, and OMPI_MCA_orte_default_hostfile is Kubeflow MPIJob's variable too
    node0 = launch(dict(MPI_ENV, INDEX="0"), "--print", "--platform", "tione", "--type", "mpi", "--", "python",
                   "train.py")
    assert node0.startswith("mpirun ") and "-np 2 -H 9.0.255.56:1,9.0.255.118:1" in node0
    node1 = launch(dict(MPI_ENV, INDEX="1"), "--print", "--platform", "tione", "--type", "mpi", "--", "python",
                   "train.py")
    assert node1 == "# node 1 waits for node 0 (9.0.255.56:29501) to finish"
    hvd = launch(dict(MPI_ENV, INDEX="0"), "--print", "--platform", "tione", "--type", "horovod", "--", "python",
                 "train.py")
    assert hvd.startswith("horovodrun -np 2 -H 9.0.255.56:1,9.0.255.118:1")
    topo = json.loads(launch({"HEAD_ADDR": RAY_HEAD, "HEAD_PORT": "6379", "RANK": "0"}, "--show-topology"))
    assert topo["platform"] == "tione" and topo["env"]["RAY_ADDRESS"] == f"{RAY_HEAD}:6379"
