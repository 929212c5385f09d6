"""The examples really run under TI-ONE's emulated node environment (seed 000): every node gets
only TI-ONE's variables (DDP: WORLD_SIZE = nodes, RANK = node index; Ray: HEAD_ADDR/HEAD_PORT/
RANK), and cloudtrain launch resolves them through the tione detector."""
import json
import os
import re
import socket
import subprocess
import sys

import pytest

from conftest import EXAMPLES, run_cli
from helpers import assert_nothing_left, handle_from, metrics, run_dir

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def submit(home, example):
    proc = run_cli("submit", "-p", "local", "--emulate", "tione", EXAMPLES / example / "job.yaml", timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    handle = handle_from(proc.stderr)
    assert_nothing_left(run_dir(home, handle))
    plan = json.loads((run_dir(home, handle) / "plan.json").read_text())
    return proc, handle, [n["env"] for n in plan["nodes"]]


def test_digits_ddp_trains_under_tione(home):
    proc, handle, envs = submit(home, "digits-ddp")
    # what the nodes got: TI-ONE's DDP table, with WORLD_SIZE and RANK counting nodes, and no
    # generic CLOUDTRAIN_NUM_NODES to fall back on
    assert [(e["WORLD_SIZE"], e["RANK"], e["INDEX"]) for e in envs] == [("2", "0", "0"), ("2", "1", "1")]
    assert all("CLOUDTRAIN_NUM_NODES" not in e and "NODE_LIST" in e for e in envs)
    assert envs[0]["CLOUDTRAIN_DETECTORS"] == "tione=cloudtrain_tione.detect:detect"
    # what the script saw: PyTorch's meaning, 2 nodes x 2 processes
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 4
    ranks = set(re.findall(r"^\[node(\d)/rank(\d)\] rank \d/4", proc.stdout, re.M))
    assert ranks == {("0", "0"), ("0", "1"), ("1", "2"), ("1", "3")}


def test_ray_counter_runs_under_tione(home):
    proc, handle, envs = submit(home, "ray-counter")
    assert [(e["HEAD_ADDR"], e["RANK"]) for e in envs] == [("127.0.0.1", "0"), ("127.0.0.1", "1")]
    assert envs[0]["HEAD_PORT"] == envs[1]["HEAD_PORT"]
    assert "counter results: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" in proc.stdout
    assert re.search(r"ray nodes: 2\b", proc.stdout)
    assert "task on Rank:1 ran on node 1" in proc.stdout


def test_digits_trains_from_the_code_package_submit_uploaded(tmp_path, home):
    """submit -p tione with code_store against the TI-ONE and COS doubles, then the two nodes run as
    TI-ONE would: the object the request's CodePackagePath names, fetched from the COS double into
    code_dir (shared by both nodes, as each container sees the same package), the request's start
    command in a shell with its Envs and TI-ONE's DDP variables, nothing but Python on PATH.  The
    output TI-ONE uploads from output_dir comes back with `cloudtrain outputs`."""
    from doubles.cos_double import CosDouble
    from doubles.tione_double import SECRET_ID, SECRET_KEY, FakeTione
    from tencentcloud.common.credential import Credential
    from cloudtrain.input.loading import load_job
    from cloudtrain.transfer.objectstore import ObjectUrl
    from cloudtrain.providers.provider import Cluster
    from cloudtrain_tione.cosstore import CosStore
    from cloudtrain_tione.provider import TioneProvider
    from cloudtrain_tione.render import decode_start_commands

    code_dir, output_dir = tmp_path / "opt-ml-code", tmp_path / "opt-ml-model"
    sets = {"providers.tione.region": "ap-shanghai", "providers.tione.instance_type": "TI.S.LARGE.POST",
            "providers.tione.code_store": "cos://train-1250000000/e2e", "providers.tione.code_dir": str(code_dir),
            "providers.tione.output_dir": str(output_dir), "storage.output": "cos://runs-1250000000/digits/"}
    job_file = EXAMPLES / "digits-ddp" / "job.yaml"
    with FakeTione() as fake, CosDouble(buckets=("train-1250000000", "runs-1250000000")) as cos:
        env = {"CLOUDTRAIN_TIONE_ENDPOINT": fake.url, "CLOUDTRAIN_COS_ENDPOINT": cos.url,
               "TENCENTCLOUD_SECRET_ID": SECRET_ID, "TENCENTCLOUD_SECRET_KEY": SECRET_KEY}
        args = [f"--set={k}={v}" for k, v in sets.items()]
        handle = run_cli("submit", "-p", "tione", job_file, "--detach", *args, env=env, check=0).stdout.strip()
        (body,) = fake.bodies("CreateTrainingTask")
        package = body["CodePackagePath"]
        store = CosStore(region=package["Region"], credential=Credential(SECRET_ID, SECRET_KEY), endpoint=cos.url)
        code_dir.mkdir()
        (key,) = package["Paths"]
        store.fetch(ObjectUrl("cos", package["Bucket"], key), code_dir / key.rsplit("/", 1)[1])
        assert [p.name for p in code_dir.iterdir()] == [key.rsplit("/", 1)[1]]  # the package, nothing else

        job = load_job(job_file, overrides=sets)
        cluster = Cluster(hosts=["127.0.0.1"] * 2, master_port=free_port())
        start = decode_start_commands(body)["StartCmd"]
        procs = []
        for node in range(2):
            node_env = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": str(tmp_path),
                        "TMPDIR": str(tmp_path)}
            node_env.update({e["Name"]: e["Value"] for e in body["Envs"]})  # what TI-ONE injects from the request
            node_env.update(TioneProvider.environment(job, node, cluster))  # TI-ONE's DDP variables (seed 000)
            procs.append(subprocess.Popen(["/bin/sh", "-c", start], cwd="/", env=node_env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=600)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], "\n----\n".join(o[-3000:] for o in outs)
        assert float(re.search(r"test_accuracy ([0-9.]+)", "".join(outs)).group(1)) >= 0.9
        # 2 nodes x 2 processes, each process on the node TI-ONE's RANK names
        ranks = {(node, *hit) for node, out in enumerate(outs)
                 for hit in re.findall(r"\brank (\d)/4 local_rank \d on node (\d)", out)}
        assert ranks == {(0, "0", "0"), (0, "1", "0"), (1, "2", "1"), (1, "3", "1")}
        # each node trained from its own unpacked copy of the package
        unpacked = sorted(p for p in tmp_path.iterdir() if p.name.startswith("tmp."))
        assert len(unpacked) == 2 and all((p / "train.py").read_bytes() == (EXAMPLES / "digits-ddp" / "train.py")
                                          .read_bytes() for p in unpacked)

        # TI-ONE uploads output_dir to the task's Output when the task ends
        output = body["Output"]
        assert output == {"Bucket": "runs-1250000000", "Region": "ap-shanghai", "Paths": ["digits/"]}
        for path in sorted(p for p in output_dir.rglob("*") if p.is_file()):
            store.put(ObjectUrl("cos", output["Bucket"], output["Paths"][0] + path.relative_to(output_dir).as_posix()),
                      path.read_bytes())
        fetched = tmp_path / "fetched"
        run_cli("outputs", handle, "-o", fetched, env=env, check=0)
        assert json.loads((fetched / "metrics.json").read_text())["world_size"] == 4
        assert (fetched / "model.pt").is_file()
        assert not cos.bad_requests and not fake.bad_requests
