"""The node side: Slurm's variables -> the topology, and the host list expanded as Slurm does.

The expansion is checked against Slurm's own ``scontrol show hostnames`` (Debian's slurm-wlm),
never against lists written here: tests/plugins/slurm/test_slurm_cluster.py.
"""
import subprocess

import pytest

from cloudtrain.extend.plugins import get_provider_class
from cloudtrain.input.loading import job_from_dict
from cloudtrain.launch.platform import Cluster

from cloudtrain_slurm.detect import detect, expand_nodelist, hostnames, master_port

@pytest.mark.parametrize("value", ["a[1-", "a]1[", "a[3-1]", "a[x-y]"])
def test_what_it_cannot_read_goes_to_scontrol(value):
    with pytest.raises(ValueError):
        expand_nodelist(value)
    asked = []

    def run(argv, **kwargs):
        asked.append(argv)
        return subprocess.CompletedProcess(argv, 0, "h1\nh2\n", "")
    assert hostnames(value, run=run) == ["h1", "h2"]
    assert asked == [["scontrol", "show", "hostnames", value]]


def node_env(**extra):
    env = {"SLURM_JOB_ID": "1234", "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "3",
           "SLURM_JOB_NODELIST": "gpu[07-08],gpu10", "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.7",
           "CLOUDTRAIN_SLURM_BATCH_NODE": "gpu07", "SLURM_GPUS_ON_NODE": "8", "SLURM_RESTART_COUNT": "2"}
    env.update(extra)
    return env


def test_a_node_of_a_three_node_job():
    t = detect(node_env())
    assert (t.platform, t.node_rank, t.num_nodes) == ("slurm", 1, 3)
    assert t.hosts == ["gpu07", "gpu08", "gpu10"]
    assert t.master_addr == "10.0.0.7"  # the batch node (node 0) ran srun: its address
    assert t.nproc_per_node == 8
    assert t.env["CLOUDTRAIN_RESTART_COUNT"] == "2"
    assert t.master_port == 29500 + (1234 % 500) * 2


def test_the_master_is_the_first_host_when_srun_ran_elsewhere():
    t = detect(node_env(CLOUDTRAIN_SLURM_BATCH_NODE="login1"))
    assert t.master_addr == "gpu07"


def test_not_slurm_without_a_job_and_a_node_id():
    assert detect({"SLURM_JOB_ID": "1"}) is None
    assert detect({}) is None


def test_two_jobs_on_one_node_get_different_ports():
    assert master_port({"SLURM_JOB_ID": "10"}) != master_port({"SLURM_JOB_ID": "11"})
    assert master_port({"SLURM_JOB_ID": "10", "CLOUDTRAIN_MASTER_PORT": "31000"}) == 31000


@pytest.mark.parametrize("kind", ["ddp", "mpi", "horovod", "deepspeed", "ps-worker", "ray", "none"])
def test_emulate_is_detects_inverse(kind):
    job = job_from_dict({"name": "e", "command": "true", "distribution": {"type": kind, "nodes": 3},
                         "resources": {"gpus_per_node": 2}})
    cls = get_provider_class("slurm")
    hosts = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    for index in range(3):
        t = detect(cls.environment(job, index, Cluster(hosts=hosts, master_port=31000)))
        assert (t.node_rank, t.num_nodes, t.hosts, t.master_addr, t.master_port, t.nproc_per_node) == \
            (index, 3, hosts, "10.0.0.1", 31000, 2)
