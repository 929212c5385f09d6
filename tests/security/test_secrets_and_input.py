"""Issue 26, items 6 and 7: secrets stay masked everywhere (the run's files included), and the
home, its store and its runs are the user's alone; hostile input is refused at its line.

The runs are real: a local ddp job prints a private key it got from ``secrets:`` in every way
a program may (whole, one line per write, inside JSON, in an exception torchrun records), and
every file under the run directory and ``$CLOUDTRAIN_HOME`` is read for any line of it."""
import base64
import contextlib
import json
import os
import signal
import sqlite3
import stat
from pathlib import Path

import pytest

from cloudtrain.runtime.store import SCHEMA
from conftest import run_cli, write_job

from e2e.helpers import assert_nothing_left, handle_from, run_dir, wait_for  # noqa: E402

JOB_SCRIPT = '''
import json, os, sys, time
from torch.distributed.elastic.multiprocessing.errors import record

key = os.environ["PEM_KEY"]


@record
def main():
    rank = os.environ.get("RANK", "0")
    print(key, flush=True)                      # whole, one write
    for line in key.splitlines():               # a line per write
        sys.stdout.write("  " + line + "\\n")
        sys.stdout.flush()
    print(json.dumps({"rank": rank, "key": key}), flush=True)  # its lines joined by \\n
    print(key, file=sys.stderr, flush=True)
    print("rank %s printed the key" % rank, flush=True)
    if os.environ.get("SLEEP"):
        time.sleep(600)
    if rank == "1":
        raise RuntimeError("cannot use this key: " + key)   # torchrun's error.json holds it


main()
'''


def pem_key() -> str:
    """A private key's shape: header, 64-character base64 lines, a short last line, footer."""
    body = base64.b64encode(os.urandom(300)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "\n".join(["-----BEGIN PRIVATE KEY-----", *lines, "-----END PRIVATE KEY-----"])


def secret_job(tmp_path, key, env=""):
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(JOB_SCRIPT)
    (tmp_path / "key.pem").write_text(key + "\n")
    return write_job(tmp_path, f"""
        name: pem
        code: code
        command: python job.py
        distribution: {{type: ddp, nodes: 1, procs_per_node: 2}}
        env: {{OMP_NUM_THREADS: "1"{env}}}
        secrets: {{PEM_KEY: {{from_file: key.pem}}}}
    """)


def leaks(key, roots, texts=()):
    """``(where, line)`` for every line of ``key`` found in a file under ``roots`` or in ``texts``."""
    lines = [line for line in key.splitlines()]
    found = []
    for root in roots:
        for path in Path(root).rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                found += [(str(path), line) for line in lines if line.encode() in data]
    for i, text in enumerate(texts):
        found += [(f"output {i}", line) for line in lines if line in text]
    return found


@pytest.mark.e2e
def test_a_multi_line_secret_the_job_prints_is_in_no_file_of_the_run(tmp_path, home):
    key = pem_key()
    proc = run_cli("submit", secret_job(tmp_path, key), timeout=240)
    assert proc.returncode == 1, proc.stderr  # rank 1 fails, on purpose
    handle = handle_from(proc.stderr)
    assert "rank 0 printed the key" in proc.stdout and "rank 1 printed the key" in proc.stdout
    logs = run_cli("logs", handle).stdout
    assert leaks(key, [home, tmp_path / "code"], [proc.stdout, proc.stderr, logs]) == []
    assert "***" in (run_dir(home, handle) / "job.log").read_text()


@pytest.mark.e2e
def test_torchrun_files_of_a_killed_supervisor_are_gone_once_cloudtrain_looks(tmp_path, home):
    key = pem_key()
    proc = run_cli("submit", secret_job(tmp_path, key, env=', SLEEP: "1"'), "--detach", check=0)
    handle = proc.stdout.strip()
    directory = run_dir(home, handle)
    wait_for(lambda: (directory / "job.log").exists() and
             (directory / "job.log").read_text().count("printed the key") == 2, timeout=180)
    # torchrun's --tee files hold what the ranks printed, in clear, while the job runs
    assert list(directory.glob("node-0/torchrun/**/stdout.log"))
    with sqlite3.connect(home / "state.db") as db:
        (pid,) = db.execute("SELECT supervisor_pid FROM jobs").fetchone()
    os.kill(pid, signal.SIGKILL)
    assert_nothing_left(directory)  # the nodes die with their supervisor
    status = run_cli("status", handle, "-o", "json", check=0)
    assert json.loads(status.stdout)["state"] == "FAILED"
    assert leaks(key, [home]) == []



@pytest.mark.e2e
def test_a_multi_line_secret_a_container_prints_is_in_no_file_of_the_run(tmp_path, home):
    """The Docker supervisor reads each container's log stream in chunks: the same masking."""
    key = pem_key()
    proc = run_cli("submit", "-p", "docker", secret_job(tmp_path, key), "--set", "image=cloudtrain/test-python:latest",
                   timeout=600)
    assert proc.returncode == 1, proc.stderr  # rank 1 fails, on purpose
    assert "rank 0 printed the key" in proc.stdout and "rank 1 printed the key" in proc.stdout
    logs = run_cli("logs", handle_from(proc.stderr)).stdout
    assert leaks(key, [home, tmp_path / "code"], [proc.stdout, proc.stderr, logs]) == []

# -- files: the home, the store and the runs are the user's alone -------------------------------
def private_modes(root: Path):
    """``{path relative to root: mode}`` of what keeps others out: the home, ``runs/``, each run's
    directory (what a run holds is behind it) and the store's files."""
    paths = [root, *root.glob("runs"), *root.glob("runs/*"), *root.glob("state.db*")]
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in paths}


@pytest.fixture
def open_umask():
    """The common umask (022): what makes a directory 0755 unless cloudtrain says otherwise."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("commands", [["submit"], ["list"], ["config-set", "list"], ["validate", "submit"],
                                      ["an-older-home", "list"]])
def test_the_home_is_0700_and_the_store_0600_whichever_command_makes_them(tmp_path, open_umask, commands):
    home = tmp_path / "fresh-home"
    env = {"CLOUDTRAIN_HOME": str(home), "CLOUDTRAIN_CONFIG": str(home / "config.yaml")}
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text("print('hello')\n")
    job = write_job(tmp_path, """
        name: modes
        code: code
        command: python job.py
        distribution: {type: none}
    """)
    for command in commands:
        if command == "submit":
            run_cli("submit", job, env=env, check=0, timeout=120)
            assert list((home / "runs").iterdir())
        elif command == "validate":
            run_cli("validate", job, env=env, check=0)
            if home.exists():  # validate need not make the home; if it does, it is private
                assert stat.S_IMODE(home.stat().st_mode) == 0o700
        elif command == "list":
            run_cli("list", env=env, check=0)
        elif command == "config-set":
            run_cli("config", "set", "-p", "docker", "image=python:3.12", env=env, check=0)
        else:  # what an older cloudtrain left: a home and a store anyone may read
            (home / "runs").mkdir(parents=True)
            with contextlib.closing(sqlite3.connect(home / "state.db")) as db:  # a sound store, world-readable
                db.executescript(SCHEMA)
            for path in (home, home / "runs"):
                path.chmod(0o755)
            (home / "state.db").chmod(0o644)
    modes = private_modes(home)
    wrong = {p: oct(m) for p, m in modes.items() if m != (0o600 if p.startswith("state.db") else 0o700)}
    assert wrong == {}, modes
    assert "state.db" in modes and "runs" in modes


# -- input: refused at its line, exit 2, nothing started or sent ---------------------------------
GITHUB_TOKEN = "ghp_" + "Zq3" * 12
HOSTILE_ENV = [
    ("NUL", "a\\u0000b"),
    ("ESCAPE", "\\u001b[2J\\u001b[31mred"),
    ("CARRIAGE_RETURN", "shown\\rhidden"),
    ("BELL", "ring\\u0007"),
    ("DELETE", "rub\\u007f"),
    ("CSI", "c1\\u009b31m"),
]


def cli_error_lines(proc):
    return [line for line in proc.stderr.splitlines() if line.startswith("cloudtrain: error: ")]


@pytest.mark.parametrize("name,value", HOSTILE_ENV)
def test_a_control_character_in_an_env_value_is_refused_at_its_line(tmp_path, home, name, value):
    job = write_job(tmp_path, f"""
        name: hostile
        code: .
        command: python job.py
        env:
          FINE: "tab\\tand newline\\n are text"
          {name}: "{value}"
    """)
    for command in ("validate", "render", "submit"):
        proc = run_cli(command, "-p", "local", job, check=2)
        assert [line.split(": ")[2] for line in cli_error_lines(proc)] == [f"{job}:6"], proc.stderr
        assert f"env.{name}" in proc.stderr
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())  # nothing started


def test_a_nul_in_a_secret_value_or_its_source_is_refused_at_its_line(tmp_path, home):
    (tmp_path / "nul.txt").write_bytes(b"abc\x00def")
    job = write_job(tmp_path, """
        name: hostile
        code: .
        command: python job.py
        secrets:
          FROM_FILE: {from_file: nul.txt}
          PATH_NUL: {from_file: "a\\u0000b"}
    """)
    proc = run_cli("submit", "-p", "local", job, check=2)
    assert sorted(line.split(": ")[2] for line in cli_error_lines(proc)) == [f"{job}:5", f"{job}:6"], proc.stderr
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())


@pytest.mark.parametrize("field,value", [
    ("storage: {inputs: {train: %s}}", "s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI-K7MDENG-bPxRfiCYzEXAMPLE@bucket/data"),
    ("storage: {output: %s}", "https://alice:correct-horse-battery@files.example.com/out"),
    ("storage: {checkpoint: %s}", "s3://token-only-user-info@bucket/ckpt"),
    ("image: %s", "https://robot:registry-pass-99@registry.example.com/team/train:1"),
    ("providers: {kubeflow: {code_store: %s}}", "s3://key:very-secret-value@bucket/code"),
])
def test_a_uri_with_user_info_is_refused_at_its_line_and_never_echoed(tmp_path, home, field, value):
    other = "spot: false" if field.startswith("image") else "image: python:3.12"  # one image: per file
    job = write_job(tmp_path, f"""
        name: userinfo
        code: .
        command: python job.py
        {field % repr(value)}
        {other}
    """)
    password = value.split("://", 1)[1].split("@", 1)[0]
    for command in ("validate", "render"):
        proc = run_cli(command, "-p", "kubeflow", job, check=2)
        assert any(line.startswith(f"cloudtrain: error: {job}:4: ") and "user info" in line
                   for line in cli_error_lines(proc)), proc.stderr
        assert password not in proc.stdout + proc.stderr
    # given with --set, the echo of the --set masks it too
    key = field.split(":")[0] if not field.startswith(("storage", "providers")) else None
    if key == "image":
        proc = run_cli("validate", "-p", "kubeflow", job, "--set", f"image={value}", check=2)
        assert "user info" in proc.stderr and password not in proc.stderr


def test_a_credential_in_env_is_warned_about_by_name_never_by_value(tmp_path, home):
    job = write_job(tmp_path, f"""
        name: envcred
        code: .
        command: python job.py
        env:
          HF_HOME: /data/hf
          GH: {GITHUB_TOKEN}
          WANDB_API_KEY: 0123456789abcdef0123
    """)
    for command in ("validate", "render"):
        proc = run_cli(command, "-p", "local", job, check=0)
        warned = [line for line in proc.stderr.splitlines() if line.startswith("cloudtrain: warning: ")]
        assert [w.split(": ")[2:4] for w in warned] == [[f"{job}:6", "env.GH"], [f"{job}:7", "env.WANDB_API_KEY"]]
        assert all("secrets:" in w for w in warned)
        assert GITHUB_TOKEN not in proc.stderr and "0123456789abcdef0123" not in proc.stderr


def test_set_echoes_in_errors_mask_secret_values(tmp_path, home):
    job = write_job(tmp_path, """
        name: echo
        code: .
        command: python job.py
    """)
    proc = run_cli("validate", "-p", "local", job, "--set", "distribution.nodes=" + GITHUB_TOKEN, check=2)
    assert "--set distribution.nodes=***" in proc.stderr and GITHUB_TOKEN not in proc.stderr
    proc = run_cli("validate", "-p", "local", job, "--set", "providers.local.db_password=hunter2-hunter2", check=2)
    assert "db_password" in proc.stderr and "hunter2-hunter2" not in proc.stderr


# -- config show / config set ----------------------------------------------------------------------
# token shapes that had no refusal (AWS keys and private keys had theirs: tests/core/test_config.py)
TOKENS = {
    "github": GITHUB_TOKEN,
    "github_pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "hugging_face": "hf_" + "aBcD" * 9,
    "slack_bot": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack_user": "xoxp-123456789012-1234567890123-AbCdEfGhIjKl",
    "openai": "sk-proj-" + "a1B2c3D4" * 5,
    "gitlab": "glpat-" + "x1Y2z3" * 4,
    "google": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
}


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_config_set_refuses_a_token_in_a_plain_key_and_points_at_secrets(tmp_path, kind):
    home = tmp_path / "home"
    env = {"CLOUDTRAIN_HOME": str(home), "CLOUDTRAIN_CONFIG": str(home / "config.yaml")}
    proc = run_cli("config", "set", "-p", "kubeflow", f"image={TOKENS[kind]}", env=env, check=2)
    assert "nothing was written" in proc.stderr
    assert "secrets:" in proc.stderr  # (AWS keys and private keys: refused already, tests/core/test_config.py)
    assert TOKENS[kind] not in proc.stdout + proc.stderr
    assert not (home / "config.yaml").exists()


def test_config_show_masks_by_key_name_and_by_value_shape(tmp_path, home):
    job = write_job(tmp_path, f"""
        name: show
        command: python job.py
        providers:
          kubeflow:
            image: python:3.12
            pod_annotations:
              client_secret: plain-looking-value-1
              api_key: another-plain-value-2
              owner: alice
              mention: {GITHUB_TOKEN}
              key_name: my-keypair
            tolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
    """)
    for output in ("text", "json"):
        proc = run_cli("config", "show", "-p", "kubeflow", job, "-o", output,
                       "--set", "providers.kubeflow.labels.db_password=hunter2-hunter2", check=0)
        shown = proc.stdout
        for secret in ("plain-looking-value-1", "another-plain-value-2", GITHUB_TOKEN, "hunter2-hunter2"):
            assert secret not in shown, output
        assert "alice" in shown and "my-keypair" in shown and "nvidia.com/gpu" in shown  # names are shown


# -- Kubernetes names: the API server's rules, at validate -----------------------------------------
# k8s.io/apimachinery/pkg/util/validation/validation.go:
#   IsDNS1123Label      ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$, at most 63            (a namespace)
#   IsDNS1123Subdomain  labels joined by '.', at most 253                        (an object's name)
#   IsValidLabelValue   ^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$, at most 63
#   IsQualifiedName     [DNS subdomain '/'] name of the label value's shape, 1-63 (a label key)
# Volcano's CRD (tests/data/crds/batch.volcano.sh_jobs.yaml) gives spec.queue the subdomain pattern
# and maxLength 253; Kueue reads the LocalQueue and the WorkloadPriorityClass from label values.
KUBE_BAD = [
    ("kubeflow", "namespace: Team_A", "namespace"),             # IsDNS1123Label: upper case, '_'
    ("kubeflow", "namespace: -team", "namespace"),              # IsDNS1123Label: starts with '-'
    ("kubeflow", "namespace: " + "n" * 64, "namespace"),        # IsDNS1123Label: 64 > 63
    ("kubeflow", "labels: {team: 'a b'}", "labels"),            # IsValidLabelValue: a space
    ("kubeflow", "labels: {team: " + "v" * 64 + "}", "labels"),  # IsValidLabelValue: 64 > 63
    ("kubeflow", "labels: {team: value-}", "labels"),           # IsValidLabelValue: ends with '-'
    ("kubeflow", "labels: {'bad key!': x}", "labels"),          # IsQualifiedName
    ("kubeflow", "node_selector: {'Example.com/gpu': a100}", "node_selector"),  # prefix: IsDNS1123Subdomain
    ("kubeflow", "queue: Team.Queue", "queue"),                 # a LocalQueue's name: IsDNS1123Subdomain
    ("kubeflow", "queue: " + "q" * 64, "queue"),                # Kueue's label: IsValidLabelValue, 64 > 63
    ("kubeflow", "priority_class: high_prio", "priority_class"),  # IsDNS1123Subdomain
    ("volcano", "queue: q_1", "queue"),                         # Volcano's CRD pattern
    ("volcano", "queue: " + "q" * 254, "queue"),                # Volcano's CRD maxLength 253
    ("volcano", "priority_class: 'p--'", "priority_class"),     # a PriorityClass: IsDNS1123Subdomain
    ("volcano", "service_account: 'Robot'", "service_account"),  # IsDNS1123Subdomain
]
# at the limit / one past it
KUBE_LIMITS = [
    ("kubeflow", "namespace: " + "n" * 63, "namespace: " + "n" * 64),
    ("kubeflow", "labels: {example.com/team: " + "V_." * 20 + "v9x, empty: ''}",
     "labels: {example.com/team: " + "V_." * 20 + "v9xy, empty: ''}"),
    ("kubeflow", "queue: " + "q" * 63, "queue: " + "q" * 64),
    ("volcano", "queue: " + ".".join(["q" * 62] * 4) + "qq", "queue: " + ".".join(["q" * 62] * 4) + "qqq"),
]


def kube_job(tmp_path, provider, option):
    return write_job(tmp_path, f"""
        name: kube
        code: .
        command: python job.py
        image: python:3.12
        providers:
          {provider}:
            {option}
    """)


@pytest.mark.parametrize("provider,option,field", KUBE_BAD)
def test_an_invalid_kubernetes_name_is_refused_at_its_line(tmp_path, home, provider, option, field):
    job = kube_job(tmp_path, provider, option)
    for command in ("validate", "render"):
        proc = run_cli(command, "-p", provider, job, check=2)
        assert ([line.split(": ")[2:4] for line in cli_error_lines(proc)]
                == [[f"{job}:7", f"providers.{provider}.{field}"]]), proc.stderr
        assert proc.stdout == ""  # render printed nothing


@pytest.mark.parametrize("provider,at_limit,past_it", KUBE_LIMITS)
def test_a_kubernetes_name_at_the_limit_passes_and_one_past_it_is_refused(tmp_path, home, provider, at_limit, past_it):
    run_cli("render", "-p", provider, kube_job(tmp_path / "at", provider, at_limit), check=0)
    proc = run_cli("validate", "-p", provider, kube_job(tmp_path / "past", provider, past_it), check=2)
    assert len(cli_error_lines(proc)) == 1 and ":7: providers." in proc.stderr


# -- the masker, streaming: a secret split over reads and lines -----------------------------------
def test_the_log_sink_masks_a_multi_line_secret_split_over_mpi_writes(tmp_path):
    """mpirun tags every write, so a rank's line arrives in pieces (``[1,3]<stdout>:ra``), and a
    key arrives a line at a time: nothing of it reaches a log file."""
    from cloudtrain.input.secrets import Masker
    from cloudtrain.runtime.supervise import LogSink
    key = pem_key()
    sink = LogSink(tmp_path, nodes=1, nproc=2, distribution="mpi", mask=Masker([key, "short-one"]))
    text = f"loaded {key} (and short-one)\n"
    pieces = [text[i:i + 7] for i in range(0, len(text), 7)]  # every line cut across writes
    for piece in pieces:
        sink.write(0, f"[1,1]<stdout>:{piece}")
    sink.write(0, "[1,0]<stdout>:" + json.dumps({"key": key}) + "\n")
    sink.close()
    assert leaks(key, [tmp_path]) == [] and "short-one" not in (tmp_path / "job.log").read_text()
    logged = (tmp_path / "node-0" / "rank-1.log").read_text()
    assert logged.startswith("loaded ***") and logged.endswith("(and ***)\n")
    assert (tmp_path / "node-0" / "rank-0.log").read_text() == '{"key": "***"}\n'  # as a whole: one ***


def test_scrubbing_torchrun_files_follows_no_link(tmp_path):
    """A link in torchrun's directory (the job may make one) is not followed: what it reaches
    is neither read nor removed."""
    from cloudtrain.input.secrets import Masker
    from cloudtrain.runtime.supervise import scrub_torchrun_files
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.log").write_text("mine\n")
    attempt = tmp_path / "run" / "node-0" / "torchrun" / "none_x" / "attempt_0" / "0"
    attempt.mkdir(parents=True)
    (attempt / "stdout.log").write_text("sekret-value\n")
    (attempt / "error.json").write_text(json.dumps({"message": "failed with sekret-value"}))
    (attempt / "elsewhere").symlink_to(outside)
    (attempt.parent / "keep.log").symlink_to(outside / "keep.log")
    scrub_torchrun_files(tmp_path / "run", Masker(["sekret-value"]))
    assert (outside / "keep.log").read_text() == "mine\n"
    assert not (attempt / "stdout.log").exists()
    assert json.loads((attempt / "error.json").read_text()) == {"message": "failed with ***"}


def test_a_platform_error_that_quotes_the_request_has_its_secrets_masked(tmp_path, home):
    """A platform's refusal may quote what it was sent, secrets filled in (the request's
    environment): submit masks them in the error, whatever its kind."""
    from cloudtrain.spec.errors import PlatformError
    from cloudtrain.input.loading import load_job
    from cloudtrain.extend.plugins import get_provider_class
    key = pem_key()

    class Refusing(get_provider_class("local")):
        def schedule(self, rendered, secrets):
            raise PlatformError(f"InvalidParameter: Environment={json.dumps(secrets)} is too long")

    (tmp_path / "key.pem").write_text(key)
    job = load_job(write_job(tmp_path, """
        name: refused
        code: .
        command: python job.py
        secrets: {PEM_KEY: {from_file: key.pem}}
    """))
    with pytest.raises(PlatformError) as info:
        Refusing().submit(job)
    assert leaks(key, [], [str(info.value)]) == [] and "***" in str(info.value)


@pytest.mark.parametrize("line", ['code: "co\\u0000de"', 'command: "python \\u0000job.py"',
                                  'image: "python\\u0000:3.12"', 'providers: {local: {python: "py\\u0000"}}'])
def test_a_nul_in_any_field_is_refused_at_its_line_not_a_traceback(tmp_path, home, line):
    other = "code: ." if line.startswith("command") else "command: python job.py"
    job = write_job(tmp_path, f"""
        name: nul
        {other}
        {line}
    """)
    for command in ("validate", "render", "submit"):
        proc = run_cli(command, "-p", "local", job, check=2)
        assert ([line.split(": ")[2] for line in cli_error_lines(proc)] == [f"{job}:3"]
                and "NUL" in proc.stderr), proc.stderr
        assert "Traceback" not in proc.stderr
