"""ModelArts' node environments, emulated here, really train the digits example.

- Standard: ``submit`` uploads the code to OBS (the OBS double) and sends the training job (the
  ModelArts fake); each node then does what ModelArts does with that request: downloads
  ``code_dir`` from OBS into its ``user-job-dir``, runs ``command`` there with the request's
  ``environments`` and ModelArts' own variables, and uploads ``CLOUDTRAIN_OUTPUT_DIR`` to the
  output's OBS directory, which ``outputs`` brings back.
- Lite: ranktable routing's renumbering (RANK_AFTER_ACC != VC_TASK_INDEX): every pod runs the
  ranks that routing gave it, not the ones of its Volcano index.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, run_cli
from helpers import assert_nothing_left, handle_from, metrics, run_dir

pytestmark = pytest.mark.e2e

# pod (VC_TASK_INDEX) i -> RANK_AFTER_ACC; the master is pod 1 (MA_MASTER_INDEX=1)
RENUMBERED = [2, 0, 1]


def test_digits_ddp_trains_under_modelarts_lite_with_renumbered_ranks(home):
    proc = run_cli("submit", "-p", "local", "--emulate", "modelarts-lite", EXAMPLES / "digits-ddp" / "job.yaml",
                   "--set", "distribution.nodes=3", "--set", "distribution.procs_per_node=1",
                   "--set", f"providers.modelarts-lite.emulate_rank_after_acc={RENUMBERED}", timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    handle = handle_from(proc.stderr)
    assert_nothing_left(run_dir(home, handle))
    assert float(re.search(r"test_accuracy ([0-9.]+)", proc.stdout).group(1)) >= 0.9
    assert metrics(home, handle)["world_size"] == 3
    # "[node<pod>/...] rank <r>/3 local_rank 0 on node <n>": the script's own view of its place
    seen = {int(pod): (int(rank), int(node)) for pod, rank, node in
            re.findall(r"^\[node(\d)[^\]]*\] rank (\d)/3 local_rank 0 on node (\d)", proc.stdout, re.M)}
    assert seen == {pod: (new, new) for pod, new in enumerate(RENUMBERED)}
    # rank 0 (pod 1, the routed master) is the one that evaluated and wrote the outputs
    assert re.search(r"^\[node1[^\]]*\] test_accuracy", proc.stdout, re.M)


def test_digits_ddp_trains_from_the_code_submit_shipped_to_obs(tmp_path, monkeypatch):
    from doubles.modelarts_double import AK, PROJECT, SK, FakeModelArts
    from doubles.obs_double import ObsDouble
    from cloudtrain.transfer import objectstore
    from cloudtrain.launch.platform import Cluster
    from cloudtrain.input.loading import load_job
    from cloudtrain.transfer.objectstore import ObjectUrl, download
    from cloudtrain.extend.plugins import get_provider
    from cloudtrain_local.ports import free_port_block
    from cloudtrain_modelarts.obsstore import ObsStore

    port = free_port_block(2)
    with FakeModelArts() as ma, ObsDouble(AK, SK) as obs:
        for key, value in {"HOME": str(tmp_path), "HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK,
                           "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT, "HUAWEICLOUD_SDK_REGION_MODELARTS_CN_NORTH_4": ma.url,
                           "HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4": obs.endpoint}.items():
            monkeypatch.setenv(key, value)
        objectstore.forget_uploads()
        obs.create_bucket("team")
        job = load_job(EXAMPLES / "digits-ddp" / "job.yaml", {
            "distribution.procs_per_node": 1, "storage.output": "obs://team/runs/digits/",
            "providers.modelarts.region": "cn-north-4", "providers.modelarts.code_store": "obs://team/cloudtrain",
            "providers.modelarts.flavor_id": "modelarts.vm.cpu.8u", "providers.modelarts.master_port": port})
        provider = get_provider("modelarts")
        run = provider.submit(job)
        (body,) = [b for m, p, b in ma.requests if m == "POST" and p.endswith("/training-jobs")]
        algorithm = body["algorithm"]
        store = ObsStore(region="cn-north-4")
        bucket, _, code_key = algorithm["code_dir"].lstrip("/").partition("/")
        nodes = []
        for index in range(job.distribution.nodes):  # what ModelArts does on each node
            home = tmp_path / f"node-{index}"
            workdir = home / "user-job-dir" / algorithm["working_dir"].rsplit("/", 1)[1]
            download(store, ObjectUrl("obs", bucket, code_key), workdir)
            assert [p.name for p in workdir.iterdir()] == ["code.tar.gz"]       # the archive alone
            output = home / "outputs" / "cloudtrain_output"
            output.mkdir(parents=True)
            image_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])  # the image's python
            env = {"PATH": image_path, **algorithm["environments"],
                   **provider.environment(job, index, Cluster(hosts=["127.0.0.1"] * 2, master_port=port)),
                   "CLOUDTRAIN_OUTPUT_DIR": str(output)}   # the output channel's local_dir, on this machine
            command = algorithm["command"].replace(f"cd {algorithm['working_dir']}", f"cd {workdir}")
            nodes.append((output, subprocess.Popen(["/bin/sh", "-c", command], env=env, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True)))
        logs = [proc.communicate(timeout=600)[0] for _, proc in nodes]
        assert [proc.returncode for _, proc in nodes] == [0, 0], "\n".join(line[-3000:] for line in logs)
        assert float(re.search(r"test_accuracy ([0-9.]+)", logs[0]).group(1)) >= 0.9
        assert "rank 1/2" in logs[1]
        for _, proc in nodes:   # each node ran the code and the launcher unpacked from the uploaded archive
            workdir = Path(proc.args[2].split("cd ", 1)[1].split(" && ", 1)[0])
            assert (workdir / "train.py").is_file() and (workdir / ".cloudtrain" / "cloudtrain_modelarts").is_dir()
        # ModelArts uploads the output channel's local_dir to its obs_url when the job ends
        (channel,) = [o for o in algorithm["outputs"] if o["name"] == "cloudtrain_output"]
        out_bucket, _, out_key = channel["remote"]["obs"]["obs_url"].lstrip("/").partition("/")
        for path in sorted(p for p in nodes[0][0].rglob("*") if p.is_file()):
            store.put(ObjectUrl("obs", out_bucket, out_key + path.relative_to(nodes[0][0]).as_posix()),
                      path.read_bytes())
        files = provider.outputs(run.id, tmp_path / "downloaded")
        assert "metrics.json" in {Path(f).name for f in files}
        assert json.loads((tmp_path / "downloaded" / "metrics.json").read_text())["world_size"] == 2
