"""No value of a job file becomes code in a node's shell, on any provider.

Every remote provider is rendered offline with a hostile value in one string field at a time (of
the job, and of the provider's options), and the shell text its nodes would run (container
commands and entrypoints, start commands, EC2's node script) is executed under ``sh`` (dash)
with PATH starting at a directory of stubs: python3, tar, aws, sshd, mpirun, ssh, shutdown...
each records its argv and the CT_* environment.  A case fails when

- a marker file appeared (``$(touch ...)``, backticks, ``;``: a value ran as code), or
- the launcher's call is missing, or its argv does not end with ``--`` and the job's command,
  word for word, or its CT_HOSTILE variable is not the value the job gave.

The job's ``setup:`` is shell the user wrote, but for the node's ``sh -c`` alone: it must reach the
launcher as one ``--setup=`` word, exactly as written (Azure's mpi jobs too, where every rank's
``cloudtrain.launch.mpirank`` gets it), and no provider may refuse it.

Fields that are shell by design (ec2's ``setup``) run the user's own text: the corpus checks that
it ran, as written.  Kubernetes: the kubelet's ``$(VAR)`` expansion (tests/doubles/kubelet_double.py,
kubernetes' third_party/forked/golang/expansion/expand.go) is applied before the command runs, so
a ``$(CT_VAR)`` or ``$$5`` the user wrote must reach the process as written.  A value a provider
refuses at validate/render (exit 2 at its line) never reaches a shell: that counts as safe.
"""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cloudtrain.spec.errors import BadInput, JobFileError
from cloudtrain.input.loading import job_from_dict
from cloudtrain.extend.plugins import get_provider, get_provider_class
from doubles.kubelet_double import kubelet_expand

SH = shutil.which("dash") or "/bin/sh"
STUBS = ("python3", "python", "tar", "aws", "sshd", "mpirun", "ssh", "ssh-keygen", "shutdown", "ss", "nvidia-smi")
PYTHON_OPTION = "py th'on"  # the image's Python: a program name with a space and a quote, as written
# provider -> (storage scheme for storage.output, extra job fields)
PROVIDERS = {
    "sagemaker": "s3://bucket/out/", "ec2": "s3://bucket/out/", "tione": "cos://bkt-1250000000/out/",
    "modelarts": "obs://bucket/out/", "azure": None, "kubeflow": "pvc://claim/out/", "volcano": "pvc://claim/out/",
    "kubeflow-trainer": "pvc://claim/out/", "eks": "pvc://claim/out/", "modelarts-lite": "pvc://claim/out/",
}
REFUSED = "refused: "
CARRIED = ("command, env", "setup")  # what every provider must carry to its nodes: a refusal is a failure
SHELL_FIELDS = {("ec2", "setup")}  # the user's own shell, by design
NOT_TEXT = {"python"}
# a value the field takes, where "x" is refused before the hostile part is even read
OPTION_BASES = {("modelarts", "code_dir"): "obs://my-bucket/code/", ("modelarts", "log_export_path"): "obs://my-bucket/logs/",
                ("tione", "output"): "cos://bkt-1250000000/out/", ("tione", "code_source"): "cos://bkt-1250000000/code/",
                ("sagemaker", "code_s3"): "s3://my-bucket/code/", ("sagemaker", "checkpoint_s3"): "s3://my-bucket/ckpt/",
                ("ec2", "code_s3"): "s3://my-bucket/code/"}  # handled apart: PYTHON_OPTION


def payload(marker: Path) -> str:
    """Every construct a shell reads as code, a marker file for each (relative: the node's shell
    stays in the case's directory; ``markers`` looks there and at /), and text that must survive.
    Short enough for the fields with a length limit (ec2 keeps storage.output in a 256-character tag)."""
    m = marker.name
    return (f"a$(touch {m}1)`touch {m}2`;touch {m}3 #|touch {m}4&"
            f"\"; touch {m}5; echo \"' ; touch {m}6 ; echo '"
            "\\\\x\\'\n$$5$(HOME)$(CT_VAR)${HOME}é☃\t*?~ !")


def markers(root: Path, marker: Path):
    """The marker files that appeared (anywhere under ``root``, or at /), removed."""
    found = sorted(set(root.rglob(marker.name + "*")) | set(Path("/").glob(marker.name + "*")))
    for path in found:
        path.unlink()
    return [str(p) for p in found]


def stub_text(calls: Path) -> str:
    return (f"#!{sys.executable} -S\n"
            "import json, os, sys\n"
            f"with open({str(calls)!r}, 'a') as f:\n"
            "    f.write(json.dumps({'name': os.path.basename(sys.argv[0]), 'argv': sys.argv[1:],\n"
            "                        'env': {k: v for k, v in os.environ.items() if k.startswith('CT_')}}) + '\\n')\n"
            "sys.exit(1 if 'copy' in sys.argv and os.environ.get('CT_FAIL_COPY') else 0)\n")


def make_stubs(root: Path) -> Path:
    bin_dir = root / "stubs"
    bin_dir.mkdir()
    text = stub_text(root / "calls.jsonl")
    for name in (*STUBS, PYTHON_OPTION):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


# -- the job and its hostile variants --------------------------------------------------------------
def base_job(provider: str, root: Path, hostile: str) -> dict:
    code = root / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("print(1)\n")
    options = dict(get_provider_class(provider).required)
    if "python" in get_provider_class(provider).Options.model_fields:
        options["python"] = PYTHON_OPTION
    if provider == "ec2":
        options["workdir"] = str(root / "work")
    if provider == "tione":
        options["code_dir"] = str(root / "tione-code")  # where TI-ONE puts the package: made by node_runs
    job = {"name": "corpus", "code": str(code), "image": "registry.example/img:1",
           "command": ["python", "train.py", hostile],
           "env": {"CT_VAR": "kubelet-expanded", "CT_HOSTILE": hostile},
           "distribution": {"type": "ddp", "nodes": 2, "procs_per_node": 1},
           "providers": {provider: options}}
    if provider == "azure":
        job["providers"]["azure"].update({"compute": "gpu-cluster", "environment": "azureml:env:1"})
    return job


def option_variants(provider: str, hostile: str, job_options: dict):
    """(field, options update) for each string field of the provider's options."""
    cls = get_provider_class(provider)
    for name, field in cls.Options.model_fields.items():
        if name in NOT_TEXT:
            continue
        ann = str(field.annotation)
        base = job_options.get(name) if name in ("workdir", "code_dir") and name in job_options else None
        base = base or OPTION_BASES.get((provider, name)) or cls.required.get(name) or \
            (field.default if isinstance(field.default, str) and field.default else "x")
        if ann in ("<class 'str'>", "typing.Optional[str]"):
            yield name, base + hostile
        elif ann in ("typing.List[str]", "typing.Optional[typing.List[str]]"):
            yield name, [hostile] if (provider, name) not in SHELL_FIELDS else None
        elif ann in ("typing.Dict[str, str]", "typing.Optional[typing.Dict[str, str]]"):
            yield name, {"CT_KEY": hostile}


def variants(provider: str, root: Path, hostile: str):
    """(what is hostile, job dict): the job's own fields, then each option."""
    job = base_job(provider, root, hostile)
    yield "command, env", job
    if PROVIDERS[provider]:
        yield "storage.output", {**job, "storage": {"output": PROVIDERS[provider] + hostile}}
        yield "storage.checkpoint", {**job, "storage": {"checkpoint": PROVIDERS[provider] + hostile}}
    yield "setup", {**job, "setup": hostile}  # one argument of the launcher's sh -c, never ours
    if provider == "azure":  # Azure ML's mpirun starts every rank: mpirank --setup runs it once per node
        yield "setup (mpi)", {**job, "setup": hostile, "distribution": {"type": "mpi", "nodes": 2, "procs_per_node": 2}}
    for name, value in option_variants(provider, hostile, job["providers"][provider]):
        if value is None:
            continue
        options = {**job["providers"][provider], name: value}
        if name in ("code_dir", "code_source") and provider in ("modelarts", "tione"):
            options.pop("code_store", None)  # code staged by hand instead of shipped: one or the other
        yield f"providers.{provider}.{name}", {**job, "providers": {provider: options}}


# -- what each provider's nodes run ------------------------------------------------------------
def walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def node_runs(provider: str, rendered, root: Path):
    """[(argv to run, environment the platform gives, stdin)] for one rendered job."""
    arts = {a.kind: a.content for a in rendered.artifacts}
    digest = "f" * 64
    if provider == "sagemaker":
        req = json.loads(json.dumps(arts["sagemaker/CreateTrainingJob"]).replace("<code-digest>", digest))
        spec = req["AlgorithmSpecification"]
        (root / "sm-code").mkdir(exist_ok=True)  # where the (stubbed) unpacker would have written the code
        return [(spec["ContainerEntrypoint"] + spec["ContainerArguments"],
                 {**req.get("Environment", {}), "CLOUDTRAIN_CODE_DIR": str(root / "sm-code")}, None)]
    if provider == "ec2":
        script = next(a.content["script"] for a in rendered.artifacts if a.kind == "shell/script" and a.name == "nodes")
        for placeholder, value in (("<spec-hash>", "a" * 64), ("<job-id>", "corpus-aaaaaaaaaaaa"),
                                   ("<code-digest>", digest), ("<master-ip>", "10.0.0.4"),
                                   ("<node-ips>", "10.0.0.4,10.0.0.5"), ("<hosts-lines>", "10.0.0.4 ct-node-0"),
                                   ("<presigned-code-url>", "https://example.com/x"), ("<instance-ids>", "i-0,i-1"),
                                   ("<instance-id>", "i-0")):
            script = script.replace(placeholder, value)
        script = script.replace("/etc/hosts", str(root / "hosts"))
        return [([SH], {"AWS_SSM_INSTANCE_ID": "i-0", "CT_FAIL_COPY": "1"}, script)]
    if provider == "tione":
        from cloudtrain_tione.render import decode_start_commands
        req = next(c for c in arts.values()
                   if isinstance(c, dict) and ("StartCmdInfo" in c or "EncodedStartCmdInfo" in c))
        code_dir = Path(rendered.options.code_dir)
        if str(code_dir).startswith(str(root)):
            code_dir.mkdir(parents=True, exist_ok=True)
        env = {e["Name"]: e["Value"] for e in req.get("Envs", [])}
        return [([SH, "-c", line], env, None) for line in decode_start_commands(req).values() if line]
    if provider == "modelarts":
        algorithm = next(c for c in arts.values() if isinstance(c, dict) and "algorithm" in c)["algorithm"]
        workdir = algorithm["working_dir"]
        (root / "ma-work").mkdir(exist_ok=True)
        command = algorithm["command"].replace(shlex.quote(workdir), shlex.quote(str(root / "ma-work")), 1)
        return [([SH, "-c", command], algorithm.get("environments", {}), None)]
    if provider == "azure":
        content = next(iter(arts.values()))
        return [([SH, "-c", content["command"]], content.get("environment_variables", {}), None)]
    runs = []  # Kubernetes: every container that runs a command, as the kubelet starts it
    for obj in walk([a.content for a in rendered.artifacts]):
        if "image" in obj and isinstance(obj.get("command"), list):
            env = {}  # the kubelet expands each value with the variables defined before it
            for item in obj.get("env", []):
                if "value" in item:
                    env[item["name"]] = kubelet_expand(item["value"], env)
            argv = [kubelet_expand(a, env) for a in obj["command"] + obj.get("args", [])]
            runs.append((argv, env, None))
    return runs


def run_case(provider: str, job_dict: dict, root: Path, hostile: str, marker: Path):
    """None when the case is safe; else what went wrong."""
    try:
        job = job_from_dict(json.loads(json.dumps(job_dict)))
        rendered = get_provider(provider).render(job)
    except (BadInput, JobFileError, ValueError) as exc:
        return REFUSED + str(exc)  # refused at its line: it reaches no shell
    calls = root / "calls.jsonl"
    bin_dir = root / "stubs"
    problems = []
    runs = node_runs(provider, rendered, root)
    if not runs:
        return "no node command found in the render"
    for argv, env, stdin in runs:
        calls.write_text("")
        full_env = {**{k: str(v) for k, v in env.items()}, "PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(root),
                    "TMPDIR": str(root)}
        subprocess.run(argv, input=stdin, env=full_env, cwd=root, capture_output=True, text=True, timeout=60)
        made = [json.loads(line) for line in calls.read_text().splitlines()]
        launch = [c for c in made if "--" in c["argv"] and "train.py" in c["argv"]]
        if not launch:
            problems.append(f"the launcher never ran: calls {[c['argv'][:4] for c in made]}")
            continue
        words = launch[-1]["argv"]
        if words[-4:] != ["--", "python", "train.py", hostile]:
            problems.append(f"the launcher got {words[-4:]!r}")
        if "setup" in job_dict and "--setup=" + job_dict["setup"] not in words[:-4]:  # before -- and the command
            problems.append(f"the launcher's --setup is not the job's setup: {[w for w in words if '--setup' in w]!r}")
        if launch[-1]["env"].get("CT_HOSTILE") != hostile:
            problems.append(f"CT_HOSTILE reached the launcher as {launch[-1]['env'].get('CT_HOSTILE')!r}")
    ran = markers(root, marker)
    if ran:
        problems.append(f"a value ran as code: {ran}")
    return "; ".join(problems) or None


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_no_value_becomes_code_in_a_node_shell(provider, tmp_path):
    marker = tmp_path / "PWNED"
    hostile = payload(marker)
    make_stubs(tmp_path)
    failures = []
    for what, job in variants(provider, tmp_path, hostile):
        problem = run_case(provider, job, tmp_path, hostile, marker)
        if problem and problem.startswith(REFUSED) and not what.startswith(CARRIED):
            continue  # a value refused at its line reaches no shell
        if problem:
            failures.append(f"{what}: {problem}")
    assert not failures, f"{provider}:\n" + "\n".join(failures)


def test_ec2_setup_is_the_users_shell_and_runs_as_written(tmp_path):
    """providers.ec2.setup is shell by design: the user's own line runs, as written."""
    make_stubs(tmp_path)
    job = base_job("ec2", tmp_path, "plain")
    job["providers"]["ec2"]["setup"] = [f"echo \"$((6 * 7))\" > {shlex.quote(str(tmp_path / 'SETUP'))}"]
    rendered = get_provider("ec2").render(job_from_dict(job))
    [(argv, env, stdin)] = node_runs("ec2", rendered, tmp_path)
    subprocess.run(argv, input=stdin, env={**env, "PATH": f"{tmp_path / 'stubs'}:/usr/bin:/bin", "HOME": str(tmp_path)},
                   cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (tmp_path / "SETUP").read_text() == "42\n"


def test_the_corpus_sees_an_injection(tmp_path):
    """The corpus's own check: the payload pasted bare, in double quotes or in single quotes (the
    mistakes it hunts) makes marker files appear."""
    marker = tmp_path / "PWNED"
    hostile = payload(marker)
    for pasted in (hostile, f'"{hostile}"', f"'{hostile}'"):
        subprocess.run([SH, "-c", f"echo {pasted}"], cwd=tmp_path, capture_output=True, timeout=30)
        assert markers(tmp_path, marker), pasted
