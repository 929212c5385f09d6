"""The launcher's command lines, one per distribution type (pure functions)."""
import json
import shlex

import pytest

from cloudtrain.launch import plans
from cloudtrain.launch.topology import Topology

HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def topo(rank=0, nodes=3, **kw):
    kw.setdefault("hosts", HOSTS[:nodes])
    return Topology(platform="test", node_rank=rank, num_nodes=nodes, master_addr=kw["hosts"][0],
                    master_port=23456, **{k: v for k, v in kw.items()})


def settings(dist="ddp", command="python train.py --lr 0.1", **kw):
    kw.setdefault("nproc_per_node", 2)
    kw.setdefault("iface", "eth0")
    kw.setdefault("node_ip", "10.0.0.1")
    return plans.Settings(distribution=dist, command=shlex.split(command), **kw)


def test_ddp_uses_static_rendezvous_with_the_node_rank():
    plan = plans.plan(topo(rank=1), settings(), {})
    assert plan.mode == "exec"
    assert plan.argv == ["python", "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "2",
                         "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "23456",
                         "--tee", "3", "train.py", "--lr", "0.1"]


def test_ddp_with_restarts_uses_c10d_rendezvous():
    argv = plans.plan(topo(), settings(max_restarts=2, job_id="j-1", log_dir="/logs"), {}).argv
    joined = " ".join(argv)
    assert "--rdzv-backend c10d --rdzv-endpoint 10.0.0.1:23456 --rdzv-id j-1 --max-restarts 2" in joined
    assert "--node-rank" not in argv
    assert "--log-dir /logs/torchrun" in joined


@pytest.mark.parametrize("command,tail", [
    ("python -m pkg.train --x 1", ["-m", "pkg.train", "--x", "1"]),
    ("python3 -u train.py", ["train.py"]),
    ("bash run.sh", ["--no-python", "bash", "run.sh"]),
])
def test_ddp_command_forms(command, tail):
    argv = plans.plan(topo(), settings(command=command), {}).argv
    assert argv[-len(tail):] == tail
    if tail[0] == "--no-python":
        assert argv[0] == "torchrun"


def test_mpirun_runs_on_node_zero_only_with_hosts_slots_and_forwarded_names():
    environ = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/lib", "OMP_NUM_THREADS": "1", "SECRET_TOKEN": "hunter2",
               "UNRELATED": "x", "NCCL_DEBUG": "INFO"}
    s = settings("mpi", is_root=True, env_names=["SECRET_TOKEN"])
    plan = plans.plan(topo(), s, environ)
    assert plan.mode == "launcher"
    line = " ".join(plan.argv)
    assert line.startswith("mpirun --allow-run-as-root -np 6 -H 10.0.0.1:2,10.0.0.2:2,10.0.0.3:2 ")
    assert "--mca btl_tcp_if_include eth0" in line
    for name in ("PATH", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "SECRET_TOKEN", "NCCL_DEBUG", "CLOUDTRAIN_NUM_NODES"):
        assert f"-x {name} " in line
    assert "hunter2" not in line and "UNRELATED" not in line
    assert "-x CLOUDTRAIN_NODE_RANK" not in line
    assert plan.argv[-4:] == ["python", "train.py", "--lr", "0.1"]
    assert plans.plan(topo(rank=2), s, environ).mode == "wait"
    assert "--allow-run-as-root" not in plans.plan(topo(), settings("mpi", is_root=False), environ).argv


def test_mpirun_merges_nodes_that_share_an_address():
    t = Topology(platform="local", node_rank=0, num_nodes=2, hosts=["127.0.0.1"] * 2)
    argv = plans.plan(t, settings("mpi", iface="lo"), {}).argv
    assert argv[argv.index("-H") + 1] == "127.0.0.1:4"


def test_mpirun_leaves_shared_memory_out_when_named_nodes_share_this_host():
    """Slurm's test nodes n1 and n2 are both 127.0.0.1: one Open MPI daemon each on one host,
    whose shared-memory files (named after the host, the job and the local rank) collide; TCP
    alone there.  One address for every node is one daemon (merged -H entry): shared memory stays."""
    named = Topology(platform="slurm", node_rank=0, num_nodes=2, hosts=["n1", "n2"], master_addr="127.0.0.1")
    line = " ".join(plans.plan(named, settings("mpi", iface="lo", loopback=True), {}).argv)
    assert "-H n1:2,n2:2" in line and "--mca btl self,tcp" in line and "vader" not in line
    merged = Topology(platform="local", node_rank=0, num_nodes=2, hosts=["127.0.0.1"] * 2)
    assert "--mca btl self,vader,tcp" in " ".join(plans.plan(merged, settings("mpi", iface="lo", loopback=True),
                                                              {}).argv)
    apart = " ".join(plans.plan(topo(nodes=2), settings("mpi"), {}).argv)
    assert "--mca btl self,vader,tcp" in apart


RDMA_PRESETS = [
    {"NCCL_IB_DISABLE": "0", "UCX_TLS": "rc"},              # Azure InfiniBand sizes (infiniband.IB_ENV)
    {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5_bond"},   # TI-ONE RDMA (seed 000 line 102), kube rdma/hca
    {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1"},        # EFA: sagemaker, ec2, eks
    {"CLOUDTRAIN_RDMA": "1"},
]


@pytest.mark.parametrize("environ", RDMA_PRESETS)
def test_mpirun_leaves_the_transport_to_open_mpi_over_rdma(environ):
    """Issue 21 #7.  With the fast network on, forcing ``--mca pml ob1 --mca btl self,vader,tcp``
    kept MPI traffic on TCP.  Open MPI's own selection picks UCX (InfiniBand/RoCE) or libfabric
    (EFA) when present: "Typically, it is unnecessary to do so; OMPI will use the best BTL
    available for each communication" (docs.open-mpi.org/en/v5.0.8/tuning-apps/networking/
    shared-memory.html).  The interface settings stay (bootstrap and fallback)."""
    line = " ".join(plans.plan(topo(), settings("mpi"), environ).argv)
    assert "--mca pml" not in line and "--mca btl " not in line and ",tcp" not in line
    assert "--mca btl_tcp_if_include eth0" in line
    tcp = " ".join(plans.plan(topo(), settings("mpi"), dict(environ, CLOUDTRAIN_RDMA="0")).argv)
    assert "--mca pml ob1 --mca btl self,vader,tcp" in tcp


def test_mpirun_names_follow_the_open_mpi_version():
    """Issue 21 #7.  Open MPI 5: "As of Open MPI version 5.0.0, the BTL has been renamed sm"
    (docs.open-mpi.org/en/v5.0.8/tuning-apps/networking/shared-memory.html; ``vader`` is only a
    transitional alias), and the runtime moved from ORTE to PRRTE
    (open-mpi.org/software/ompi/major-changes.php), whose parameters -- the out-of-band
    ``oob_tcp_if_include`` among them -- go through ``--prtemca`` (docs.open-mpi.org/en/v5.0.x/mca.html)."""
    four = " ".join(plans.plan(topo(), settings("mpi", mpi_major=4), {}).argv)
    assert "--mca oob_tcp_if_include eth0 --mca pml ob1 --mca btl self,vader,tcp" in four
    five = " ".join(plans.plan(topo(), settings("mpi", mpi_major=5), {}).argv)
    assert "--mca btl_tcp_if_include eth0 --prtemca oob_tcp_if_include eth0 --mca pml ob1 --mca btl self,sm,tcp" in five
    assert "vader" not in five and "--mca oob_tcp_if_include" not in five
    assert plans.mpi_version("mpirun (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/") == 5
    assert plans.mpi_version("mpirun (Open MPI) 4.1.4") == 4
    assert plans.mpi_version("HYDRA build details:") is None and plans.mpi_version("") is None


def test_the_launcher_detects_this_nodes_open_mpi():
    from cloudtrain.launch import main
    import subprocess
    installed = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    assert main._open_mpi_major() == int(installed.split("(Open MPI)")[1].split(".")[0])


def test_horovodrun_and_deepspeed():
    h = plans.plan(topo(), settings("horovod"), {})
    assert h.argv[:6] == ["horovodrun", "-np", "6", "-H", "10.0.0.1:2,10.0.0.2:2,10.0.0.3:2", "--network-interface"]
    assert plans.plan(topo(rank=1), settings("horovod"), {}).mode == "wait"
    plan = plans.plan(topo(rank=2), settings("deepspeed", job_id="j"), {})
    hostfile = plan.argv[plan.argv.index("--hostfile") + 1]
    assert plan.argv == ["deepspeed", "--no_local_rank", "--no_ssh", "--hostfile", hostfile, "--node_rank", "2",
                         "--num_nodes", "3", "--master_addr", "10.0.0.1", "--num_gpus", "2",
                         "--master_port", "23456", "train.py", "--lr", "0.1"]
    assert plan.files == {hostfile: "10.0.0.1 slots=2\n10.0.0.2 slots=2\n10.0.0.3 slots=2\n"}
    local = Topology(platform="local", node_rank=1, num_nodes=2, hosts=["127.0.0.1"] * 2)
    assert list(plans.plan(local, settings("deepspeed"), {}).files.values()) == ["node0 slots=2\nnode1 slots=2\n"]
    single = plans.plan(topo(nodes=1), settings("deepspeed"), {})
    assert "--no_ssh" not in single.argv and "--hostfile" not in single.argv and not single.files


def test_ray_head_and_worker():
    head = plans.plan(topo(), settings("ray", node_ip="10.0.0.1"), {})
    assert head.mode == "ray-head" and head.wait_peers
    assert head.start[:2] == ["ray", "start"] and "--head" in head.start
    assert json.loads(head.start[head.start.index("--resources") + 1]) == {"Rank:0": 1}
    assert head.env["RAY_ADDRESS"] == "10.0.0.1:23456"
    assert head.argv == ["python", "train.py", "--lr", "0.1"]
    worker = plans.plan(topo(rank=2), settings("ray", node_ip="10.0.0.3"), {})
    assert worker.mode == "ray-worker" and worker.argv == []
    assert worker.start[worker.start.index("--address") + 1] == "10.0.0.1:23456"
    assert worker.start[worker.start.index("--node-ip-address") + 1] == "10.0.0.3"


def test_ray_on_loopback_gets_distinct_addresses():
    t = Topology(platform="local", node_rank=1, num_nodes=2, hosts=["127.0.0.1"] * 2)
    worker = plans.plan(t, settings("ray", node_ip="127.0.0.1"), {})
    assert worker.start[worker.start.index("--node-ip-address") + 1] == "127.0.0.3"
    assert worker.start[worker.start.index("--address") + 1] == "127.0.0.2:29500"


def test_ps_worker_derives_tf_config():
    plan = plans.plan(topo(rank=2), settings("ps-worker", ps=1), {})
    config = json.loads(plan.env["TF_CONFIG"])
    assert config["cluster"] == {"ps": ["10.0.0.1:23458"], "worker": ["10.0.0.2:23459", "10.0.0.3:23460"]}
    assert config["task"] == {"type": "worker", "index": 1}
    assert plan.env["CLOUDTRAIN_ROLE"] == "worker" and plan.env["CLOUDTRAIN_ROLE_INDEX"] == "1"
    assert plan.env["RANK"] == "2" and plan.env["WORLD_SIZE"] == "3"
    ps = plans.plan(topo(rank=0), settings("ps-worker", ps=1), {})
    assert json.loads(ps.env["TF_CONFIG"])["task"] == {"type": "ps", "index": 0}


def test_ps_worker_keeps_the_platforms_tf_config():
    given = {"cluster": {"ps": ["ps-0:2222"], "worker": ["w-0:2222"]}, "task": {"type": "worker", "index": 0}}
    plan = plans.plan(topo(rank=1, nodes=2, tf_config=given), settings("ps-worker"), {})
    assert json.loads(plan.env["TF_CONFIG"]) == given


def test_ps_worker_without_workers_is_refused():
    with pytest.raises(ValueError, match="ps-worker needs 1 <= ps < nodes"):
        plans.plan(topo(nodes=2), settings("ps-worker", ps=2), {})


def test_none_runs_the_command_with_node_level_variables():
    plan = plans.plan(topo(rank=1), settings("none"), {})
    assert plan.argv == ["python", "train.py", "--lr", "0.1"]
    assert plan.env["RANK"] == "1" and plan.env["WORLD_SIZE"] == "3" and plan.env["LOCAL_RANK"] == "0"


def test_exports_the_neutral_variables():
    env = plans.plan(topo(rank=1, output_dir="/out"), settings(), {}).env
    assert env["CLOUDTRAIN_NODE_RANK"] == "1" and env["CLOUDTRAIN_NUM_NODES"] == "3"
    assert env["CLOUDTRAIN_NPROC_PER_NODE"] == "2" and env["CLOUDTRAIN_HOSTS"] == ",".join(HOSTS)
    assert env["CLOUDTRAIN_MASTER_ADDR"] == "10.0.0.1" and env["CLOUDTRAIN_MASTER_PORT"] == "23456"
    assert env["CLOUDTRAIN_PLATFORM"] == "test" and env["CLOUDTRAIN_OUTPUT_DIR"] == "/out"


@pytest.mark.parametrize("dist", ["mpi", "horovod", "ps-worker"])
def test_multi_node_without_hosts_is_refused(dist):
    t = Topology(platform="x", node_rank=0, num_nodes=2)
    with pytest.raises(ValueError, match="CLOUDTRAIN_HOSTS"):
        plans.plan(t, settings(dist), {})


def test_unknown_type_and_empty_command():
    with pytest.raises(ValueError, match="unknown distribution type"):
        plans.plan(topo(), settings("spark"), {})
    with pytest.raises(ValueError, match="no command given"):
        plans.plan(topo(), plans.Settings(distribution="ddp", command=[]), {})


def test_mpi_ranks_go_through_the_rank_shim_and_get_the_final_environment():
    s = settings("mpi", python="python3.11")
    argv = plans.plan(topo(), s, {"PATH": "/bin"}).argv
    shim = argv.index("cloudtrain.launch.mpirank")
    assert argv[shim - 2:shim + 2] == ["python3.11", "-m", "cloudtrain.launch.mpirank", "--"]
    line = " ".join(argv)
    # set by the launcher itself, so forwarded to ranks on other hosts too
    assert "-x GLOO_SOCKET_IFNAME" in line and "-x TP_SOCKET_IFNAME" in line
    assert "-x PYTHONUNBUFFERED" not in line  # mpirun tags every write; whole lines need buffering
    assert "cloudtrain.launch.mpirank" in plans.plan(topo(), settings("horovod"), {}).argv


@pytest.mark.parametrize("environ,expected", [
    ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "CLOUDTRAIN_NPROC_PER_NODE": "4"},
     {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "CLOUDTRAIN_NODE_RANK": "1"}),
    ({"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"},
     {"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}),
    ({}, {}),
    # issue 28 #2: torchrun's MASTER_ADDR/MASTER_PORT too (node 0, where rank 0 runs)
    ({"OMPI_COMM_WORLD_RANK": "3", "CLOUDTRAIN_MASTER_ADDR": "mj-worker-0.mj.ns.svc", "CLOUDTRAIN_MASTER_PORT": "29500",
      "MASTER_ADDR": "10.0.0.9"},
     {"RANK": "3", "MASTER_ADDR": "mj-worker-0.mj.ns.svc", "MASTER_PORT": "29500"}),
])
def test_rank_shim_maps_mpi_variables(environ, expected):
    from cloudtrain.launch.mpirank import rank_environment
    assert rank_environment(environ) == expected


def test_a_node_range_makes_ddp_elastic():
    argv = plans.plan(topo(), settings(min_nodes=2, job_id="j"), {}).argv
    assert argv[argv.index("--nnodes") + 1] == "2:3"
    assert "--rdzv-backend" in argv and "--node-rank" not in argv
    static = plans.plan(topo(), settings(min_nodes=3), {}).argv
    assert static[static.index("--nnodes") + 1] == "3" and "--node-rank" in static


def test_torchruns_pet_defaults_from_the_platform_do_not_override_the_plan():
    environ = {"PET_RDZV_BACKEND": "c10d", "PET_MAX_RESTARTS": "3", "PET_NNODES": "3", "PATH": "/bin"}
    s = settings()
    env = plans.final_environment({}, topo(), s, environ)
    assert not [k for k in env if k.startswith("PET_")] and env["PATH"] == "/bin"
    kept = plans.final_environment({}, topo(), settings("ray"), environ)
    assert kept["PET_NNODES"] == "3"


@pytest.mark.parametrize("dist", ["ddp", "deepspeed", "mpi", "ps-worker", "ray"])
def test_a_loopback_job_loads_the_store_hook_and_binds_liveness_to_loopback(dist, tmp_path):
    s = settings(dist, ps=1, loopback=True, log_dir=str(tmp_path), iface="lo")
    p = plans.plan(topo(nodes=3), s, {"PYTHONPATH": "/job/lib"})
    site = str(tmp_path / "site")
    assert p.env["PYTHONPATH"] == site + ":/job/lib"
    assert "install()" in p.files[site + "/sitecustomize.py"]
    assert p.listen_host == "127.0.0.1"


def test_a_job_on_real_addresses_is_left_as_it_was():
    p = plans.plan(topo(nodes=3), settings("ddp", iface="eth0"), {"PYTHONPATH": "/job/lib"})
    assert "PYTHONPATH" not in p.env and not p.files and p.listen_host == ""


def test_the_store_hook_binds_a_server_store_to_its_host_only():
    import torch.distributed as torch
    from cloudtrain.launch import loopback_site

    class Store(torch.TCPStore):
        pass

    loopback_site.patch(Store)
    store = Store("127.0.0.1", 0, 1, True)
    tcp = open("/proc/self/net/tcp").read().splitlines()[1:]
    port = "%04X" % store.port
    local = [line.split()[1] for line in tcp if line.split()[1].endswith(":" + port) and line.split()[3] == "0A"]
    assert local == ["0100007F:" + port]  # 127.0.0.1, and not also :: in tcp6
    assert not [line for line in open("/proc/self/net/tcp6").read().splitlines()[1:]
                if line.split()[1].endswith(":" + port) and line.split()[3] == "0A"]


def test_mpirun_forwards_every_efa_preset_to_every_rank():
    """Issue 28 (likely item, confirmed).  EFA's presets (``cloudtrain_aws.instances.EFA_ENV``: sagemaker,
    ec2, eks) include ``RDMAV_FORK_SAFE``, which libibverbs reads in each process that opens the
    device: "Setting the environment variable RDMAV_FORK_SAFE or IBV_FORK_SAFE has the same effect
    as calling ibv_fork_init()" (linux-rdma/rdma-core libibverbs/man/ibv_fork_init.3.md).  Ranks
    that mpirun starts on other nodes get only what ``-x`` names (Open MPI's mpirun(1): "-x Export
    the specified environment variables to the remote nodes"), so every preset must be named."""
    from cloudtrain_aws.instances import EFA_ENV
    environ = dict(EFA_ENV, IBV_FORK_SAFE="1", RDMAV_HUGEPAGES_SAFE="1")
    line = " ".join(plans.plan(topo(), settings("mpi"), environ).argv)
    for name in environ:
        assert f"-x {name} " in line


def test_the_store_hook_fails_as_tcpstore_does_on_a_port_in_use():
    """Two nodes of a local job on one machine both match the c10d endpoint 127.0.0.1, so both try
    to host torchrun's store; torch's c10d backend joins as a client when the server fails with
    the RuntimeError TCPStore raises (torch/distributed/elastic/rendezvous/
    c10d_rendezvous_backend.py, _create_tcp_store: ``except (ValueError, RuntimeError,
    TimeoutError)``).  An OSError from the hook ended the second node instead."""
    import torch.distributed as torch
    from cloudtrain.launch import loopback_site

    class Store(torch.TCPStore):
        pass

    loopback_site.patch(Store)
    first = Store("127.0.0.1", 0, 1, True)
    with pytest.raises(RuntimeError):
        Store("127.0.0.1", first.port, 1, True)
    assert Store("127.0.0.1", first.port, 1, False)   # the fallback: a client of the first


def test_elastic_ddp_gives_every_rendezvous_round_its_own_store():
    """Issue 28 #1.  torch shares the agents' store with the workers, set up in the first round
    only, so a pod the platform re-created (it joins a later round) waits for the first round's
    MASTER_ADDR key under the new round's prefix and the job hangs (torch/distributed/elastic/
    rendezvous/dynamic_rendezvous.py, next_rendezvous; tests/e2e/test_kubeflow_restarts.py runs
    it).  ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` is torch's own switch for a store per round."""
    t = topo(rank=1)
    assert plans.plan(t, settings(max_restarts=1), {}).env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert plans.plan(t, settings(min_nodes=2), {}).env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in plans.plan(t, settings(), {}).env  # static: no store per round
    local = Topology(platform="local", node_rank=1, num_nodes=2, hosts=["127.0.0.1"] * 2)
    argv = plans.plan(local, settings(max_restarts=1, node_ip="127.0.0.1", loopback=True), {}).argv
    assert argv[argv.index("--local-addr") + 1] == "127.0.0.1"   # each round's store stays on loopback
    assert "--local-addr" not in plans.plan(t, settings(max_restarts=1), {}).argv
