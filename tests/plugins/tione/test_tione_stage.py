"""The staged code runs on a TI-ONE node: the rendered start command, in a shell, with only the
staged directory (code + launcher bundle) and TI-ONE's DDP variables -- no cloudtrain installed."""
import os
import shutil
import subprocess
import sys
import tarfile

from cloudtrain.loading import load_job
from cloudtrain.plugins import get_provider
from conftest import write_job

from cloudtrain_tione.request import decode_start_commands
from cloudtrain_tione.stage import main as stage

# a Python without cloudtrain installed, when the machine has one
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def test_staged_code_and_the_rendered_start_command(tmp_path, capsys):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    staged = tmp_path / "staged"
    path = write_job(code, f"""
        name: st
        command: python train.py --note "a b"
        image: img:1
        distribution: {{type: ddp, nodes: 2, procs_per_node: 2}}
        providers:
          tione: {{instance_type: TI.S.LARGE.POST, code_source: image, code_dir: {staged}, python: {PYTHON}}}
        """)
    assert stage([str(path), str(staged)]) == 0
    assert (staged / "train.py").exists() and (staged / ".cloudtrain" / "cloudtrain_tione" / "detect.py").exists()
    assert stage([str(path), str(code / "inside")]) == 2
    assert "is inside the code directory" in capsys.readouterr().err
    assert stage([str(path), str(tmp_path / "code.tar.gz"), "--archive"]) == 0
    with tarfile.open(tmp_path / "code.tar.gz") as tar:
        assert ".cloudtrain/cloudtrain/launch/main.py" in tar.getnames()

    content = get_provider("tione").render(load_job(path)).artifacts[0].content
    assert "EncodedStartCmdInfo" in content  # the command has quotes
    line = decode_start_commands(content)["StartCmd"].replace("-m cloudtrain.launch", "-m cloudtrain.launch --print")
    pybin = tmp_path / "pybin"  # the image's `python` (without one, the launcher runs the command in its own)
    pybin.mkdir()
    (pybin / "python").symlink_to(sys.executable)
    env = {"PATH": f"{pybin}:/usr/bin:/bin", "NODE_LIST": "a:1,b:1", "INDEX": "1", "MASTER_ADDR": "10.35.110.11",
           "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1", "GPU_NUM": "2", "GPU_NUM_PER_NODE": "1"}
    env.update({e["Name"]: e["Value"] for e in content["Envs"]})  # what TI-ONE injects from the request
    proc = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("python -m torch.distributed.run --nnodes 2 --nproc-per-node 2 --node-rank 1 "
                                   "--master-addr 10.35.110.11 --master-port 23456 --tee 3 train.py --note 'a b'")
    shutil.rmtree(staged)
