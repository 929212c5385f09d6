"""ec2: RunInstances, the placement group, SSM commands and the nodes' launch script, rendered
and validated with botocore's models; submit -> status -> logs -> cancel against moto in server
mode with the double's EC2/SSM extensions; the scripts that SSM would run really train here."""
import json
import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import cloudtrain
from doubles.aws_double import outputs_of, validate_request
from cloudtrain.extend import plugins
from cloudtrain.spec.errors import BadInput, JobFileError, PlatformError
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.provider import State
from conftest import EXAMPLES, run_cli

BUCKET = "ct-code"
OPTIONS = {"image_id": "ami-12c6146b", "instance_profile": "cloudtrain-node", "code_s3": f"s3://{BUCKET}/code"}
SETS = {f"providers.ec2.{k}": v for k, v in OPTIONS.items()}
SSH_PUB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests cloudtrain"


def job(**extra):
    data = {"name": "ec2-job", "command": "python train.py",
            "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 1},
            "env": {"OMP_NUM_THREADS": "2"}, "providers": {"ec2": dict(OPTIONS)}}
    for key, value in extra.items():
        if key == "options":
            data["providers"]["ec2"].update(value)
        else:
            data[key] = value
    return job_from_dict(data)


def artifacts(j):
    return plugins.get_provider("ec2").render(j).artifacts


def filled(text):
    for placeholder, value in (("<spec-hash>", "a" * 64), ("<job-id>", "ec2-job-aaaaaaaaaaaa"),
                               ("<code-digest>", "f" * 64),
                               ("<master-ip>", "10.0.0.4"), ("<node-ips>", "10.0.0.4,10.0.0.5"),
                               ("<hosts-lines>", "10.0.0.4 ct-node-0\n10.0.0.5 ct-node-1"),
                               ("<presigned-code-url>", "https://example.com/x"), ("<ssh-public-key>", SSH_PUB),
                               ("<instance-ids>", "i-0123456789abcdef0,i-0123456789abcdef1"),
                               ("<instance-id>", "i-0123456789abcdef0")):
        text = text.replace(placeholder, value)
    return text


# -- render ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,nodes", [("ddp", 2), ("mpi", 2), ("horovod", 3), ("deepspeed", 2), ("ps-worker", 3),
                                        ("ray", 2), ("none", 1)])
def test_every_distribution_renders_valid_requests_and_scripts(kind, nodes):
    arts = artifacts(job(distribution={"type": kind, "nodes": nodes}))
    kinds = [a.kind for a in arts]
    assert kinds.count("shell/script") == 1 + (1 if kind in ("mpi", "horovod") and nodes > 1 else 0)
    assert ("ec2/CreatePlacementGroup" in kinds) == (nodes > 1)
    for a in arts:
        service, _, operation = a.kind.partition("/")
        if service in ("ec2", "s3", "ssm"):
            validate_request(service, operation, a.content, strict=False)
            validate_request(service, operation, json.loads(filled(json.dumps(a.content))))
    run = next(a.content for a in arts if a.kind == "ec2/RunInstances")
    assert (run["MinCount"], run["MaxCount"], run["InstanceType"]) == (nodes, nodes, "m5.xlarge")
    assert run["ClientToken"] == "<job-id>" and run["IamInstanceProfile"] == {"Name": "cloudtrain-node"}
    tags = {t["Key"]: t["Value"] for t in run["TagSpecifications"][0]["Tags"]}
    assert tags["cloudtrain:job-id"] == "<job-id>" and tags["cloudtrain:spec-hash"] == "<spec-hash>"
    if nodes > 1:
        assert run["Placement"] == {"GroupName": "cloudtrain-<job-id>"}
    [script] = [a.content for a in arts if a.kind == "shell/script" and a.name == "nodes"]
    text = filled(script["script"])
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            check = subprocess.run([shell, "-n"], input=text, text=True, capture_output=True)
            assert check.returncode == 0, (shell, check.stderr)
    assert 'export CLOUDTRAIN_NODE_RANK="$NODE"\n' in text
    assert "export CLOUDTRAIN_MASTER_ADDR='10.0.0.4'\n" in text
    assert "export CLOUDTRAIN_HOSTS='10.0.0.4,10.0.0.5'\n" in text
    assert f"--type {kind}" in text and "python3 -m cloudtrain_aws.node -- python3 -m cloudtrain.launch" in text
    assert "export OMP_NUM_THREADS=2\n" in text  # the job's own value wins over the MPI default


def test_a_node_finds_its_rank_from_the_instance_id_ssm_gives_it(tmp_path):
    """The one script SSM sends every node: its rank is where AWS_SSM_INSTANCE_ID (set by the SSM
    agent for every command) is in the job's instance list; an instance not in it stops, and shuts
    down (an SSM agent too old to set the variable would otherwise leave every instance running)."""
    text = filled(next(a.content["script"] for a in artifacts(job(distribution={"type": "ddp", "nodes": 3}))
                       if a.name == "nodes"))
    ids = ["i-0123456789abcdef0", "i-0123456789abcdef1", "i-0123456789abcdef2"]
    text = text.replace("i-0123456789abcdef0,i-0123456789abcdef1", ",".join(ids))
    prologue = text[:text.index("NODE=$((NODE - 1))\n") + len("NODE=$((NODE - 1))\n")] + 'echo "rank=$NODE"\n'
    (tmp_path / "shutdown").write_text('#!/bin/sh\necho "$*" >>"$0.calls"\n')  # never this machine's
    (tmp_path / "shutdown").chmod(0o755)
    path = f"{tmp_path}:{os.environ['PATH']}"
    for shell in [s for s in ("sh", "dash", "bash") if shutil.which(s)]:
        for rank, instance in enumerate(ids):
            out = subprocess.run([shell], input=prologue, text=True, capture_output=True,
                                 env={"PATH": path, "AWS_SSM_INSTANCE_ID": instance})
            assert (out.returncode, out.stdout) == (0, f"rank={rank}\n"), (shell, out.stderr)
        for env in ({"AWS_SSM_INSTANCE_ID": "i-0123456789abcdef"}, {}):  # a prefix of an id; no SSM agent
            (tmp_path / "shutdown.calls").unlink(missing_ok=True)
            out = subprocess.run([shell], input=prologue, text=True, capture_output=True, env={"PATH": path, **env})
            assert out.returncode == 2 and "is not one of the nodes of ec2-job-aaaaaaaaaaaa" in out.stderr, shell
            assert "failed while finding its rank (exit 2)" in out.stderr, shell
            assert (tmp_path / "shutdown.calls").read_text() == (  # the backstop armed first, then the end's
                "-h +1445 cloudtrain: max_runtime plus 5 minutes reached\n-h +1 cloudtrain: the job ended\n"), shell


def test_mpi_scripts_apply_the_seeds_lessons():
    arts = artifacts(job(distribution={"type": "mpi", "nodes": 2, "procs_per_node": 2}, env={},
                         options={"ssh_port": 2022, "ifname": "ens5"}))
    node0 = filled(next(a.content["script"] for a in arts if a.name == "nodes"))
    # one thread per rank on every node unless the job says otherwise; mpirun forwards them with -x
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS"):
        assert f"export {name}=1\n" in node0
    assert "export CLOUDTRAIN_IFNAME=ens5\n" in node0  # the launcher's --mca btl_tcp_if_include
    assert "export OMPI_MCA_plm_rsh_args='-p 2022 -i /root/.ssh/cloudtrain-ec2-job-aaaaaaaaaaaa" in node0
    assert "/usr/sbin/sshd -p 2022" in node0 and "  Port 2022" in node0
    # sshd forks into the background before it binds (OpenSSH sshd.c: daemon() before
    # server_listen()): node 0's launcher waits for every node's port before mpirun
    assert "export CLOUDTRAIN_WAIT_SSH=2022\n" in node0
    assert SSH_PUB in node0 and "Host ct-node-* $(echo '10.0.0.4,10.0.0.5' | tr , ' ')" in node0
    keygen = next(a.content["script"] for a in arts if a.name == "ssh-key")
    assert "ssh-keygen -q -t ed25519" in keygen
    ddp = filled(next(a.content["script"] for a in artifacts(job()) if a.name == "nodes"))
    assert "ssh" not in ddp and "OPENBLAS_NUM_THREADS" not in ddp
    # what the launcher makes of it on node 0: mpirun with -x forwarding and the interface pinned
    from cloudtrain.launch import plans
    from cloudtrain.launch.topology import Topology
    topo = Topology(platform="ec2", node_rank=0, num_nodes=2, master_addr="10.0.0.4", hosts=["10.0.0.4", "10.0.0.5"])
    settings = plans.Settings(distribution="mpi", command=["python", "train.py"], nproc_per_node=2, iface="ens5")
    argv = plans.plan(topo, settings, {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "GOTO_NUM_THREADS": "1",
                                       "LD_LIBRARY_PATH": "/x", "PATH": "/bin"}).argv
    line = " ".join(argv)
    assert "--mca btl_tcp_if_include ens5" in line
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "LD_LIBRARY_PATH", "PATH"):
        assert f"-x {name}" in line


def test_rdma_on_asks_for_efa_interfaces_and_needs_a_subnet():
    arts = artifacts(job(network={"rdma": "on"}, options={"subnet_id": "subnet-1", "security_group_ids": ["sg-1"]}))
    run = next(a.content for a in arts if a.kind == "ec2/RunInstances")
    assert run["NetworkInterfaces"] == [{"DeviceIndex": 0, "NetworkCardIndex": 0, "InterfaceType": "efa",
                                         "SubnetId": "subnet-1", "Groups": ["sg-1"], "DeleteOnTermination": True}]
    assert "SubnetId" not in run and "SecurityGroupIds" not in run
    assert "export FI_PROVIDER=efa\n" in next(a.content["script"] for a in arts if a.name == "nodes")
    with pytest.raises(JobFileError, match="providers.ec2.subnet_id"):
        artifacts(job(network={"rdma": "on"}))


def test_p5_gets_one_ena_primary_and_32_efa_only_interfaces_and_no_socket_ifname():
    """p5.48xlarge has 32 network cards with EFA.  AWS (EC2 User Guide, "Maximize network
    bandwidth on Amazon EC2 instances with multiple network cards", the P5 example: "32 EFA
    devices and one ENA device"): the primary interface ENA, the EFA devices EFA-only, which take
    no IP address.  32 interfaces of type `efa` took 32 addresses of the subnet per node and gave
    the node 32 IP interfaces for NCCL's bootstrap to choose from."""
    arts = artifacts(job(resources={"accelerator": "H100", "gpus_per_node": 8},
                         options={"subnet_id": "subnet-1", "security_group_ids": ["sg-1"]}))
    run = next(a.content for a in arts if a.kind == "ec2/RunInstances")
    assert run["InstanceType"] == "p5.48xlarge"
    validate_request("ec2", "RunInstances", json.loads(filled(json.dumps(run))))
    layout = [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in run["NetworkInterfaces"]]
    assert layout == [(0, 0, "interface"), (0, 1, "efa-only"), *((card, 0, "efa-only") for card in range(1, 32))]
    script = next(a.content["script"] for a in arts if a.name == "nodes")
    assert "export FI_PROVIDER=efa\n" in script and "NCCL_SOCKET_IFNAME" not in script
    one = artifacts(job(resources={"accelerator": "A10G", "gpus_per_node": 4}, network={"rdma": "on"},
                        options={"subnet_id": "subnet-1"}))  # g5.12xlarge: one card, one EFA with ENA
    run = next(a.content for a in one if a.kind == "ec2/RunInstances")
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in run["NetworkInterfaces"]] == \
        [(0, 0, "efa")]


STORAGE = {"inputs": {"train": "s3://team-data/digits/train", "vocab": "s3://team-data/vocab.txt"},
           "output": "s3://team-data/runs/"}


def test_storage_is_copied_by_the_node_script_and_the_output_is_tagged():
    arts = artifacts(job(storage=STORAGE))
    script = next(a.content["script"] for a in arts if a.name == "nodes")
    down = 'PYTHONPATH="$WORK/code/.cloudtrain${PYTHONPATH:+:$PYTHONPATH}" python3 -m cloudtrain_aws.node copy '
    assert ('export CLOUDTRAIN_INPUT_TRAIN="$WORK/input/train"\n' + down +
            's3://team-data/digits/train "$CLOUDTRAIN_INPUT_TRAIN"\n') in script
    assert down + 's3://team-data/vocab.txt "$CLOUDTRAIN_INPUT_VOCAB"\n' in script
    # inputs before the launcher, the output after it (and after the last checkpoint sync)
    launch, up = script.index("python3 -m cloudtrain.launch"), script.index('copy "$CLOUDTRAIN_OUTPUT_DIR" ')
    assert script.index("CLOUDTRAIN_INPUT_VOCAB") < launch < script.index("exited with code") < up
    assert "copy \"$CLOUDTRAIN_OUTPUT_DIR\" 's3://team-data/runs/<job-id>' ||" in script
    for shell in [s for s in ("sh", "dash", "bash") if shutil.which(s)]:
        assert subprocess.run([shell, "-n"], input=filled(script), text=True).returncode == 0
    run = next(a.content for a in arts if a.kind == "ec2/RunInstances")
    tags = {t["Key"]: t["Value"] for t in run["TagSpecifications"][0]["Tags"]}
    assert tags["cloudtrain:output"] == "s3://team-data/runs/"
    validate_request("ec2", "RunInstances", json.loads(filled(json.dumps(run))))
    plain = next(a.content["script"] for a in artifacts(job()) if a.name == "nodes")
    assert "cloudtrain_aws.node copy" not in plain and "CLOUDTRAIN_INPUT_" not in plain


def test_storage_outside_s3_or_an_output_too_long_for_a_tag_is_refused():
    # EC2 API Reference, data type Tag, Value: "Constraints: Tag values are case-sensitive and accept
    # a maximum of 256 Unicode characters." (botocore's ec2 model sets no length on it)
    with pytest.raises(JobFileError, match=r"storage.inputs.train: ec2 cannot take 'pvc://data/train' .*it takes s3://"):
        artifacts(job(storage={"inputs": {"train": "pvc://data/train"}}))
    with pytest.raises(JobFileError, match=r"storage.output: is 263 characters; .*\(at most 256\)"):
        artifacts(job(storage={"output": "s3://team-data/" + "x" * 248}))


def test_restarts_are_the_controllers():
    import warnings
    from cloudtrain.orchestrate.controller import needs_following
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        artifacts(job(max_restarts=1))
    assert any("max_restarts" in str(w.message) and "controller submits the job again" in str(w.message)
               for w in caught)
    assert needs_following(job(max_restarts=1), "ec2")


# -- lifecycle against the double --------------------------------------------------------------------
@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, BUCKET, instance_profile="cloudtrain-node")


def provider(aws):
    return plugins.get_provider("ec2", **aws.clients())


def digits(**sets):
    return cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml", overrides={**SETS, **sets})


def sent_scripts(aws):
    """instance id -> the launch script SSM was asked to run there"""
    return {i: p["Parameters"]["commands"][0] for s, a, p in aws.requests
            if a == "SendCommand" and "cloudtrain.launch" in p["Parameters"]["commands"][0] for i in p["InstanceIds"]}


def job_instances(aws, name):
    ec2 = aws.client("ec2")
    found = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:cloudtrain:job-id", "Values": [name]}])
             ["Reservations"] for i in r["Instances"]]
    return sorted(found, key=lambda i: int(next(t["Value"] for t in i["Tags"] if t["Key"] == "cloudtrain:node")))


def command_of(instance):
    return next(t["Value"] for t in instance["Tags"] if t["Key"] == "cloudtrain:command")


def test_submit_runs_every_node_through_ssm_and_follows_it(aws):
    run = provider(aws).submit(digits())
    region, name = run.id.split("/")
    assert region == "us-east-1" and re.fullmatch(r"digits-ddp-[0-9a-f]{12}", name)
    nodes = job_instances(aws, name)
    assert len(nodes) == 2 and aws.count("RunInstances") == 1
    # a cluster placement group of the job's own, really used by the instances
    groups = aws.client("ec2").describe_placement_groups(GroupNames=[f"cloudtrain-{name}"])["PlacementGroups"]
    assert groups[0]["Strategy"] == "cluster"
    assert {i["Placement"]["GroupName"] for i in nodes} == {f"cloudtrain-{name}"}
    # one SendCommand to both nodes: the script with the nodes' instance ids in node order (a node's
    # rank is its place there), their addresses, and a URL of the code archive
    [send] = [p for s, a, p in aws.requests if a == "SendCommand"]
    ids, ips = [i["InstanceId"] for i in nodes], [i["PrivateIpAddress"] for i in nodes]
    assert send["InstanceIds"] == ids and send["MaxConcurrency"] == "100%"
    script = send["Parameters"]["commands"][0]
    assert f"NODE=$(echo '{','.join(ids)}' | tr , " in script
    assert f"export CLOUDTRAIN_MASTER_ADDR='{ips[0]}'\n" in script
    assert f"{ips[1]} ct-node-1  # cloudtrain {name}" in script
    assert "<" not in script.replace("<<", "")  # every placeholder filled
    assert {command_of(i) for i in nodes} == {aws.client("ssm").list_commands()["Commands"][0]["CommandId"]}
    url = re.search(r"'(http[^']+)' code.tar.gz", script).group(1)
    archive = urllib.request.urlopen(url).read()  # the presigned URL works (no S3 permission on the node)
    assert len(archive) > 1000
    # the node checks the archive's sha256 before it unpacks it: the digest of what was uploaded
    assert f"--sha256 '{hashlib.sha256(archive).hexdigest()}' code.tar.gz code.part" in script
    for _s, a, p in aws.requests:
        if a == "SendCommand":
            assert p["DocumentName"] == "AWS-RunShellScript" and p["Parameters"]["executionTimeout"] == ["86400"]
    # status: from the command invocations, then the end
    status = run.status()
    assert (status.state, status.nodes, status.nodes_up) == (State.RUNNING, 2, 2)
    aws.finish_command(command_of(nodes[0]), nodes[0]["InstanceId"], "Success", "rank 0/2\ntest_accuracy 0.95\n")
    assert run.status().state is State.RUNNING
    aws.finish_command(command_of(nodes[1]), nodes[1]["InstanceId"], "Success", "rank 1/2\n")
    final = run.wait(timeout=10)
    assert final.state is State.SUCCEEDED and final.exit_code == 0
    assert "".join(run.logs()).splitlines() == ["[node0] rank 0/2", "[node0] test_accuracy 0.95", "[node1] rank 1/2"]
    assert [s.handle for s in provider(aws).list()] == [run.handle]
    with pytest.raises(BadInput, match=f"{name} has no storage.output: its nodes kept their output in"):
        provider(aws).outputs(run.id, Path("unused"))


def test_more_nodes_than_one_ssm_command_takes_go_in_batches_of_50(aws):
    run = provider(aws).submit(digits(**{"distribution.nodes": 51, "distribution.procs_per_node": 1}))
    nodes = job_instances(aws, run.id.split("/")[1])
    sends = [p for s, a, p in aws.requests if a == "SendCommand"]
    ids = [i["InstanceId"] for i in nodes]
    assert [p["InstanceIds"] for p in sends] == [ids[:50], ids[50:]]
    assert [p["Comment"].rsplit(" ", 1)[1] for p in sends] == ["0-49", "50-50"]
    scripts = {p["Parameters"]["commands"][0] for p in sends}
    assert len(scripts) == 1 and f"'{','.join(ids)}'" in scripts.pop()  # the whole list, for every batch
    commands = [command_of(i) for i in nodes]
    assert len(set(commands[:50])) == 1 and len(set(commands[50:])) == 1 and commands[0] != commands[50]
    assert aws.count("SendCommand") == 2 and aws.count("CreateTags") == 51 + 2  # node indexes, then commands
    status = run.status()
    assert (status.state, status.nodes, status.nodes_up) == (State.RUNNING, 51, 51)
    aws.finish_command(commands[50], ids[50], "Failed", "boom\n", code=1)
    assert "node 50 Failed (exit 1)" in run.status().message


def test_logs_of_a_job_with_two_commands_read_only_its_streams_of_the_log_group(aws):
    """With log_group, SSM writes <command-id>/<instance-id>/aws-runShellScript/stdout; a job of 51
    nodes has two commands, and the group holds other jobs' streams too."""
    run = provider(aws).submit(digits(**{"distribution.nodes": 51, "distribution.procs_per_node": 1,
                                         "providers.ec2.log_group": "/cloudtrain/ec2"}))
    nodes = job_instances(aws, run.id.split("/")[1])
    for index in (0, 50):
        stream = f"{command_of(nodes[index])}/{nodes[index]['InstanceId']}/aws-runShellScript/stdout"
        aws.emit_logs("", "", [f"rank {index}"], group="/cloudtrain/ec2", stream=stream)
    aws.emit_logs("", "", ["another job's line"], group="/cloudtrain/ec2",
                  stream="0123abcd-other-command/i-0123456789abcdef0/aws-runShellScript/stdout")
    assert sorted(str(run.logs()).splitlines()) == ["[node0] rank 0", "[node50] rank 50"]


def test_a_failed_node_fails_the_job(aws):
    run = provider(aws).submit(digits())
    nodes = job_instances(aws, run.id.split("/")[1])
    aws.finish_command(command_of(nodes[1]), nodes[1]["InstanceId"], "Failed", "boom\n", code=3)
    status = run.status()
    assert status.state is State.FAILED and "node 1 Failed (exit 3)" in status.message


def test_the_status_says_what_a_failed_node_was_doing(aws):
    """The node script's last stderr line names the failed step (test_aws_ec2_node_end runs it);
    GetCommandInvocation's StandardErrorContent, "The first 8,000 characters written by the
    plugin to stderr" (botocore's ssm model), carries it to the status message."""
    run = provider(aws).submit(digits())
    nodes = job_instances(aws, run.id.split("/")[1])
    aws.finish_command(command_of(nodes[0]), nodes[0]["InstanceId"], "Success", "rank 0/2\n")
    aws.finish_command(command_of(nodes[1]), nodes[1]["InstanceId"], "Failed", "", code=1, stderr=(
        "botocore.exceptions.NoCredentialsError: Unable to locate credentials\n"
        "[cloudtrain] node 1 failed while copying storage.inputs.vocab from s3://team-data/vocab.txt (exit 1)\n"))
    status = run.status()
    assert status.state is State.FAILED
    assert status.message == ("node 0 Success (exit 0), node 1 Failed (exit 1 while copying storage.inputs.vocab "
                              "from s3://team-data/vocab.txt)")


def test_cancel_terminates_only_the_jobs_instances(aws):
    ec2 = aws.client("ec2")
    other_job = provider(aws).submit(digits(**{"env.OTHER": "1"}))
    foreign = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    run = provider(aws).submit(digits())
    name = run.id.split("/")[1]
    status = run.cancel()
    assert status.state is State.CANCELLED
    assert {i["State"]["Name"] for i in job_instances(aws, name)} == {"terminated"}
    states = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances()["Reservations"]
              for i in r["Instances"]}
    assert states[foreign] == "running"
    assert {i["State"]["Name"] for i in job_instances(aws, other_job.id.split("/")[1])} == {"running"}
    ssm = aws.client("ssm")
    inst = job_instances(aws, name)[0]
    invocation = ssm.get_command_invocation(CommandId=command_of(inst), InstanceId=inst["InstanceId"])
    assert invocation["Status"] == "Cancelled"
    assert run.cancel().state is State.CANCELLED  # idempotent
    assert aws.count("TerminateInstances") == 1


def test_efa_instances_get_one_efa_interface_per_network_card(aws):
    run = provider(aws).submit(digits(**{"providers.ec2.instance_type": "p4d.24xlarge", "providers.ec2.subnet_id":
                                         aws.client("ec2").describe_subnets()["Subnets"][0]["SubnetId"]}))
    nodes = job_instances(aws, run.id.split("/")[1])
    run_request = next(p for s, a, p in aws.requests if a == "RunInstances")
    # p4d: 4 network cards with EFA (EC2's data), laid out as AWS recommends for several cards (EC2
    # User Guide, "Maximize network bandwidth on Amazon EC2 instances with multiple network cards"):
    # an ENA primary, EFA-only on card 0 device 1 and at device 0 of every other card
    interfaces = sorted((int(v), int(run_request[k.replace("NetworkCardIndex", "DeviceIndex")]),
                         run_request[k.replace("NetworkCardIndex", "InterfaceType")])
                        for k, v in run_request.items() if k.endswith(".NetworkCardIndex"))
    assert interfaces == [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"), (2, 0, "efa-only"),
                          (3, 0, "efa-only")]
    script = sent_scripts(aws)[nodes[0]["InstanceId"]]
    # the catalog row (p4d: EFA with RDMA read) gives the presets at render, device RDMA included
    assert all(f"export {k}={v}\n" in script for k, v in
               {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1", "FI_EFA_USE_DEVICE_RDMA": "1",
                # EFA's out-of-order delivery breaks NCCL's LL protocols (aws-ofi-nccl issue #76;
                # sagemaker-training-toolkit PR #196 sets it on EFA too)
                "NCCL_PROTO": "simple"}.items())
    plain = provider(aws).submit(digits(**{"env.X": "1"}))
    assert "FI_PROVIDER" not in sent_scripts(aws)[job_instances(aws, plain.id.split("/")[1])[0]["InstanceId"]]


def test_mpi_node0_makes_the_key_and_every_node_trusts_it(aws):
    aws.run_command = lambda script: ("Success", SSH_PUB + "\n") if "ssh-keygen" in script else None
    run = provider(aws).submit(cloudtrain.load_job(EXAMPLES / "mpi-allreduce" / "job.yaml", overrides=SETS))
    nodes = job_instances(aws, run.id.split("/")[1])
    keygen = [p for s, a, p in aws.requests if a == "SendCommand" and "ssh-keygen" in p["Parameters"]["commands"][0]]
    assert [p["InstanceIds"] for p in keygen] == [[nodes[0]["InstanceId"]]]
    for script in sent_scripts(aws).values():
        assert f"echo '{SSH_PUB}' >>/root/.ssh/authorized_keys" in script


def test_a_lost_run_instances_response_starts_the_instances_once(aws):
    aws.fail("RunInstances", "drop")
    run = provider(aws).submit(digits())
    assert aws.count("RunInstances") == 2 and aws.dropped == 1
    assert len(job_instances(aws, run.id.split("/")[1])) == 2  # ClientToken: the same reservation
    again = provider(aws).submit(digits())
    assert again.handle == run.handle and aws.count("RunInstances") == 2  # attached, nothing started


def test_instances_that_never_reach_ssm_are_terminated(aws):
    aws.ssm_online = False
    with pytest.raises(PlatformError, match="did not register with SSM") as info:
        provider(aws).submit(digits(**{"providers.ec2.ready_timeout_seconds": 1}))
    assert info.value.exit_code == 3
    states = {i["State"]["Name"] for r in aws.client("ec2").describe_instances()["Reservations"]
              for i in r["Instances"]}
    assert states == {"terminated"}


def test_nothing_is_started_without_an_ami(aws):
    with pytest.raises(JobFileError, match="providers.ec2.image_id: is not set"):
        provider(aws).submit(cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml"))
    assert sum(aws.calls.values()) == 0


def test_cli_submit_detach_status_logs_cancel(aws):
    sets = [f"--set={k}={v}" for k, v in SETS.items()]
    proc = run_cli("submit", "-p", "ec2", EXAMPLES / "digits-ddp" / "job.yaml", *sets, "--detach", env=aws.env(),
                   check=0)
    handle = proc.stdout.strip()
    assert re.fullmatch(r"ec2://us-east-1/digits-ddp-[0-9a-f]{12}", handle)
    status = json.loads(run_cli("status", handle, "-o", "json", env=aws.env(), check=0).stdout)
    assert status["state"] == "RUNNING" and status["nodes"] == 2
    assert "CANCELLED" in run_cli("cancel", handle, env=aws.env(), check=0).stdout
    assert handle in run_cli("list", "-p", "ec2", env=aws.env(), check=0).stdout


# -- the scripts SSM would run, run here ----------------------------------------------------------------
def test_the_node_scripts_that_were_sent_really_train(aws, tmp_path):
    """Play the SSM agent: run each node's script as sent, with this machine in place of the
    instances (their addresses -> 127.0.0.1, /etc/hosts and each node's work dir -> tmp, the
    instance profile -> the double's credentials).  The nodes copy storage.inputs down and their
    output up; ``outputs`` brings the output back."""
    from cloudtrain_local.ports import free_port_block
    port = free_port_block(3)
    aws.client("s3").put_object(Bucket=BUCKET, Key="data/vocab.txt", Body=b"zero one two")
    run = provider(aws).submit(digits(**{
        "command": "python train.py --epochs 2", "distribution.procs_per_node": 1,
        "providers.ec2.python": sys.executable, "providers.ec2.workdir": str(tmp_path / "work"),
        "providers.ec2.master_port": port, "providers.ec2.terminate_when_done": False,
        "storage.inputs.vocab": f"s3://{BUCKET}/data/vocab.txt", "storage.output": f"s3://{BUCKET}/runs"}))
    name = run.id.split("/")[1]
    nodes = job_instances(aws, name)
    scripts = sent_scripts(aws)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env = {k: v for k, v in env.items() if not k.startswith(("CLOUDTRAIN_", "PET_", "AWS_"))
           and k not in ("RANK", "WORLD_SIZE", "PYTHONPATH")}
    env.update({k: v for k, v in aws.env().items() if k.startswith("AWS_")})
    procs = []
    for index, inst in enumerate(nodes):
        script = scripts[inst["InstanceId"]]
        env["AWS_SSM_INSTANCE_ID"] = inst["InstanceId"]  # as the SSM agent sets it
        for other in nodes:
            script = script.replace(other["PrivateIpAddress"], "127.0.0.1")
        script = script.replace("/etc/hosts", str(tmp_path / f"hosts-{index}"))
        script = script.replace(str(tmp_path / "work"), str(tmp_path / f"work-{index}"))
        (tmp_path / f"node-{index}.sh").write_text(script)
        procs.append(subprocess.Popen(["sh", str(tmp_path / f"node-{index}.sh")], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = outputs_of(procs)
    assert [p.returncode for p in procs] == [0, 0], outputs
    accuracy = float(re.search(r"test_accuracy ([0-9.]+)", outputs[0]).group(1))
    assert accuracy >= 0.9, outputs[0]
    assert "[cloudtrain] node 1 exited with code 0" in outputs[1]
    # both nodes ran in one job: world size 2, and the outputs went to the node's work dir
    metrics = json.loads(next((tmp_path / "work-0").glob("*/output/metrics.json")).read_text())
    assert "ct-node-1  # cloudtrain" in (tmp_path / "hosts-1").read_text()
    assert metrics["world_size"] == 2
    for index in (0, 1):  # every node had the input before the launcher started
        assert (tmp_path / f"work-{index}" / name / "input" / "vocab" / "vocab.txt").read_text() == "zero one two"
    files = provider(aws).outputs(run.id, tmp_path / "fetched")
    assert sorted(p.name for p in files) == sorted(p.name for p in (tmp_path / "work-0" / name / "output").iterdir())
    assert json.loads((tmp_path / "fetched" / "metrics.json").read_text()) == metrics
    keys = [o["Key"] for o in aws.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="runs/")["Contents"]]
    assert all(k.startswith(f"runs/{name}/") for k in keys)


def test_validate_says_what_ec2_does_not_do_at_its_line(tmp_path):
    """issue 28: `network.rdma: auto` without `subnet_id` dropped EFA with no word; issue 30 item 5:
    `image` was ignored on ec2 in silence.  Both are said at validate, at their lines, and the job
    still validates (exit 0)."""
    from conftest import write_job
    base = ("name: w\ncommand: python t.py\nimage: pytorch/pytorch:2.3.0\nresources:\n  accelerator: A100\n"
            "  gpus_per_node: 8\nproviders:\n  ec2:\n    image_id: ami-12c6146b\n    instance_profile: n\n"
            f"    code_s3: s3://{BUCKET}/code\n    region: us-east-1\n")
    path = write_job(tmp_path, base)
    proc = run_cli("validate", "-p", "ec2", path)
    assert proc.returncode == 0, proc.stderr
    assert f"{path}:3: image: " in proc.stderr and "not used here" in proc.stderr, proc.stderr
    assert f"{path}:8: providers.ec2.subnet_id: " in proc.stderr and "without EFA" in proc.stderr, proc.stderr
    path.write_text(base.replace("image: pytorch/pytorch:2.3.0\n", "") + "    subnet_id: subnet-1\n")
    proc = run_cli("validate", "-p", "ec2", path)
    assert proc.returncode == 0 and "image" not in proc.stderr and "EFA" not in proc.stderr, proc.stderr
    path.write_text(base.replace("image: pytorch/pytorch:2.3.0\n", "network:\n  rdma: off\n"))
    assert "EFA" not in run_cli("validate", "-p", "ec2", path).stderr


def test_an_instance_that_ended_under_a_running_node_says_why_and_the_controller_reads_it(aws):
    """DescribeInstances' StateReason of an ended instance reaches the status message (issue 41):
    the double terminates as EC2 does for a TerminateInstances call, 'Client.UserInitiatedShutdown:
    User initiated shutdown', which is no preemption (someone ended it): not restarted by default."""
    from cloudtrain.orchestrate.failures import classify
    run = provider(aws).submit(digits())
    nodes = job_instances(aws, run.id.split("/")[1])
    aws.client("ec2").terminate_instances(InstanceIds=[nodes[1]["InstanceId"]])
    status = run.status()
    assert status.state is State.FAILED
    assert "node 1 terminated [Client.UserInitiatedShutdown" in status.message, status.message
    assert classify("ec2", status.message)[0] == "other"
    # a reclaimed spot instance's reason, as the EC2 API reference's StateReason lists it
    spot = status.message.replace("Client.UserInitiatedShutdown: User initiated shutdown",
                                  "Server.SpotInstanceTermination: Spot instance termination")
    assert classify("ec2", spot)[0] == "preemption"
