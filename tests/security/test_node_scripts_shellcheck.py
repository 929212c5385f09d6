"""shellcheck (Debian's package; scripts/test.sh installs it) passes on every shell text a node
runs: EC2's node script, SageMaker's entrypoint, TI-ONE's start command, ModelArts' command,
Azure's command and every Kubernetes container's ``sh -c`` script, for the job shapes that change
them (ddp; mpi over ssh; storage, checkpoints and setup; routed ModelArts Lite).  The texts come
from the same offline renders as the node-shell corpus (test_node_shell_corpus.node_runs)."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider
from test_node_shell_corpus import PROVIDERS, base_job, node_runs

SHAPES = {
    "ddp": {},
    "mpi": {"distribution": {"type": "mpi", "nodes": 2, "procs_per_node": 2}},
    "storage": {"storage": {"output": "OUT", "checkpoint": "OUT"}},
}


def shellcheck() -> str:
    path = shutil.which("shellcheck")
    if path is None:
        pytest.fail("shellcheck is not installed: apt-get install -y shellcheck (scripts/test.sh does it)")
    return path


def scripts(provider, shape, root):
    job = base_job(provider, root, "--epochs=1")
    extra = dict(SHAPES[shape])
    if "storage" in extra:
        if not PROVIDERS[provider]:
            return []
        extra["storage"] = {k: PROVIDERS[provider] + "x/" for k in extra["storage"]}
    job.update(extra)
    if provider == "ec2":
        job["providers"]["ec2"]["setup"] = ["apt-get install -y htop"]
        if shape == "mpi":
            job["providers"]["ec2"]["ssh_port"] = 2222
    try:
        rendered = get_provider(provider).render(job_from_dict(job))
    except Exception as exc:  # a shape the provider does not take (exit 2 at its line)
        if shape == "ddp":
            raise
        print(f"{provider} {shape}: not rendered: {exc}", file=sys.stderr)
        return []
    out = []
    for argv, _, stdin in node_runs(provider, rendered, root):
        if stdin is not None:
            out.append(("sh", stdin))
        elif "-c" in argv:
            shell = "bash" if argv[0].endswith("bash") else "sh"
            out.append((shell, argv[argv.index("-c") + 1]))
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_node_script_passes_shellcheck(provider, shape, tmp_path):
    tool = shellcheck()
    texts = scripts(provider, shape, tmp_path)
    if shape == "ddp":
        assert texts, f"{provider}: no shell text found in the render"
    for i, (shell, text) in enumerate(texts):
        path = tmp_path / f"{provider}-{shape}-{i}.sh"
        path.write_text(text if text.startswith("#!") else f"#!/bin/{shell}\n{text}\n")
        proc = subprocess.run([tool, "-s", shell, "-f", "gcc", str(path)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{provider} ({shape}):\n{proc.stdout}\n--- the script:\n{text}"


def test_shellcheck_finds_the_mistakes_it_is_here_for(tmp_path):
    """The check itself: an unquoted expansion in an echo, as ec2's old failed-upload line had."""
    path = tmp_path / "bad.sh"
    path.write_text('#!/bin/sh\nd=$1\ncd $d\n')
    assert subprocess.run([shellcheck(), "-s", "sh", str(path)], capture_output=True).returncode != 0
