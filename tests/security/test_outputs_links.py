"""``cloudtrain outputs`` never follows a link the job left in its output (issue 39, item 6).

What a job writes to its output directory is the job's (its script's, its image's): a link
there may point at the user's ``~/.aws/credentials``.  A link that stays inside the output comes
back as a link, any other is left out and named, a FIFO is left out (reading it would hang), and
no byte of a file outside the output is copied.  Once with the local provider, once with a
docker image that plants the links itself (a ``.pth`` file, run by every Python in it).
"""
import os
import re
import textwrap

import pytest

from conftest import run_cli

SECRET = "aws_secret_access_key = AKIAHOSTILE0SECRET0K"

PLANT = textwrap.dedent("""
    import os
    out = os.environ.get("CLOUDTRAIN_OUTPUT_DIR")
    if out and not os.path.lexists(os.path.join(out, "creds")):
        os.makedirs(os.path.join(out, "ckpt"), exist_ok=True)
        open(os.path.join(out, "ckpt", "step-100.txt"), "w").write("weights\\n")
        os.symlink("step-100.txt", os.path.join(out, "ckpt", "latest"))       # inside: kept as a link
        os.symlink(CREDS, os.path.join(out, "creds"))                         # absolute, outside
        os.symlink("../" * 12 + CREDS.lstrip("/"), os.path.join(out, "up"))  # relative, outside
        os.symlink(os.path.dirname(CREDS), os.path.join(out, "awsdir"))       # a directory outside
        os.mkfifo(os.path.join(out, "pipe"))
""")


def fake_home(tmp_path):
    creds = tmp_path / "home" / ".aws" / "credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text(f"[default]\n{SECRET}\n")
    return creds


def check_download(handle, dest):
    proc = run_cli("outputs", handle, "--dest", dest)
    assert proc.returncode == 0, proc.stderr
    got = {str(p.relative_to(dest)) for p in dest.rglob("*")} - {".cloudtrain-outputs"}
    assert got == {"ckpt", "ckpt/step-100.txt", "ckpt/latest"}, got
    assert os.readlink(dest / "ckpt" / "latest") == "step-100.txt"
    assert (dest / "ckpt" / "latest").read_text() == "weights\n"
    for path in dest.rglob("*"):
        assert path.is_symlink() or path.is_dir() or SECRET not in path.read_text()
    warning = re.search(r"warning: .*", proc.stderr).group()
    assert all(name in warning for name in ("creds", "up", "awsdir", "pipe")), proc.stderr
    assert "AKIA" not in proc.stdout + proc.stderr
    assert "downloaded 2 files" in proc.stdout


def test_local_outputs_copy_no_link_out_of_the_output(tmp_path, home):
    creds = fake_home(tmp_path)
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(f"CREDS = {str(creds)!r}\n" + PLANT)
    job = tmp_path / "job.yaml"
    job.write_text("name: links\ncode: code\ncommand: python3 train.py\ndistribution: {type: none, nodes: 1}\n")
    proc = run_cli("submit", "-p", "local", job, timeout=300)
    assert proc.returncode == 0, proc.stderr
    handle = re.search(r"submitted (\S+)", proc.stderr).group(1)
    check_download(handle, tmp_path / "fetched")


@pytest.mark.e2e
def test_a_docker_image_that_plants_links_gets_none_followed(tmp_path, home):
    import docker
    client = docker.from_env()
    creds = fake_home(tmp_path)
    base = "cloudtrain/test-python:latest"  # scripts/build-test-image.sh
    client.images.get(base)
    # a .pth file of the image's Python runs its import line in every Python started there
    script = ("for py in python python3; do d=$($py -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])') "
              "&& printf '%s' \"$PLANT\" > $d/ctplant.py && echo 'import ctplant' > $d/ctplant.pth; done")
    container = client.containers.run(base, ["/bin/sh", "-c", script], entrypoint=[], network_mode="none",
                                      environment={"PLANT": f"CREDS = {str(creds)!r}\n" + PLANT}, detach=True)
    tag = "cloudtrain/test-python:plants-links"
    try:
        assert container.wait(timeout=60)["StatusCode"] == 0, container.logs()
        container.commit(repository=tag.split(":")[0], tag=tag.split(":")[1])
    finally:
        container.remove(force=True)
    try:
        code = tmp_path / "code"
        code.mkdir()
        (code / "train.py").write_text("print('an innocent script')\n")
        job = tmp_path / "job.yaml"
        job.write_text("name: links\ncode: code\ncommand: python train.py\ndistribution: {type: none, nodes: 1}\n")
        proc = run_cli("submit", "-p", "docker", job, "--set", f"image={tag}", timeout=900)
        assert proc.returncode == 0, proc.stderr
        handle = re.search(r"submitted (\S+)", proc.stderr).group(1)
        check_download(handle, tmp_path / "fetched")
    finally:
        client.images.remove(tag, force=True)
