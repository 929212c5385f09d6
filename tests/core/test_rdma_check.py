"""cloudtrain.commands.rdma_check: was RDMA used, from NCCL's NCCL_DEBUG=INFO lines (any provider's logs)."""
import pytest

from cloudtrain.commands import cli
from cloudtrain.commands.rdma_check import analyse

# Line shapes as NCCL prints them (host:pid:tid [dev] NCCL INFO ...), with the prefixes that
# torchrun --tee ([default0]:) and the local provider ([node1/rank3]) put in front.
SEED = "[0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA"  # seed 000, verbatim
IB_GDR = [
    "node-0:2101:2160 [0] NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE [1]mlx5_bond_1:1/RoCE ; OOB eth0:10.0.0.1<0>",
    "node-0:2101:2160 [0] NCCL INFO Using network IB",
    "node-0:2101:2160 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7   8   9  10  11  12  13  14  15",
    "node-0:2101:2160 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
    "[default0]:node-0:2101:2160 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/IB/0/GDRDMA",
    "[node0/rank7] node-0:2108:2171 [7] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/3(1)/GDRDMA",
    "node-0:2101:2160 [0] NCCL INFO Connected all rings",
]
SOCKET = [
    "node-0:77:91 [0] NCCL INFO NET/IB : No device found.",
    "node-0:77:91 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "node-0:77:91 [0] NCCL INFO Using network Socket",
    "node-0:77:91 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0",
    "node-0:77:91 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
]


def test_the_seed_line_is_rdma_with_gpudirect():
    report = analyse([SEED + "\n"])
    assert (report.verdict, report.used, report.channels, report.gdr_channels) == ("rdma", True, {"IBext": 1}, 1)
    assert report.summary() == "RDMA: yes, GPUDirect RDMA on all 1 inter-node NCCL channels (1 via IBext)"
    assert report.evidence == [SEED]


def test_ib_with_gpudirect_among_intra_node_lines():
    report = analyse(IB_GDR)
    assert report.verdict == "rdma" and report.ok
    assert report.channels == {"IB": 2} and report.local_channels == 1 and report.networks == ["IB"]
    assert report.evidence == [IB_GDR[4], IB_GDR[5]]


def test_rdma_without_gpudirect():
    report = analyse(["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
                      "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA"])
    assert report.verdict == "rdma-no-gdr" and report.used is True
    assert "without GPUDirect on 1 of 2" in report.summary() and "NCCL_NET_GDR_LEVEL" in report.summary()


def test_tcp_sockets_mean_no_rdma():
    report = analyse(SOCKET)
    assert (report.verdict, report.used, report.channels) == ("socket", False, {"Socket": 2})
    assert report.summary().startswith("RDMA: no, NCCL went over TCP sockets (2 via Socket)")
    assert "NET/IB : No device found." in report.evidence[-1]


def test_some_channels_over_tcp_is_not_rdma():
    report = analyse([SEED, SOCKET[3]])
    assert (report.verdict, report.used) == ("mixed", False)
    assert "1 of 2 inter-node channels went over TCP" in report.summary()


def test_efa_libfabric_counts_as_rdma():
    lines = ["ip-10-0-0-1:31:58 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
             "ip-10-0-0-1:31:58 [0] NCCL INFO Using network AWS Libfabric",
             "ip-10-0-0-1:31:58 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA"]
    report = analyse(lines)
    assert report.verdict == "rdma" and report.channels == {"AWS Libfabric": 1}


@pytest.mark.parametrize("lines,verdict,used", [
    (["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
      "h:1:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct"],
     "intra-node", None),
    (["h:1:2 [0] NCCL INFO Using network IBext"], "rdma-unconfirmed", True),
    (["h:1:2 [0] NCCL INFO Using network Socket"], "socket", False),
    (["epoch 1 loss 0.3", "rank 0: all done"], "unknown", None),
    ([], "unknown", None),
])
def test_weaker_evidence(lines, verdict, used):
    report = analyse(lines)
    assert (report.verdict, report.used) == (verdict, used)
    assert report.summary().startswith("RDMA: ")


def test_cli_exit_code_follows_the_answer(capsys):
    # the fakeone test provider has no logs: no evidence, exit 1
    assert cli.main(["logs", "--check-rdma", "fakeone://job-1"]) == 1
    assert capsys.readouterr().out.startswith("RDMA: unknown, no NCCL channel lines")
