"""``cloudtrain doctor``, ``completion``, ``init``, ``prune`` and colour (issue 30, item 7), through
the command line as a user types them."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import run_cli, write_job

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
NOT_INHERITED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION",
                 "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "KUBECONFIG", "TENCENTCLOUD_SECRET_ID", "HUAWEICLOUD_SDK_AK",
                 "AZURE_CLIENT_ID", "NO_COLOR", "FORCE_COLOR")


@pytest.fixture
def user(tmp_path, home, monkeypatch):
    """A user with nothing set up: their own HOME (no ~/.aws, ~/.kube, ...) and config file."""
    for name in NOT_INHERITED:
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("{}\n")
    env = dict(HOME=str(tmp_path / "user"), CLOUDTRAIN_CONFIG=str(config),
               AWS_CONFIG_FILE=str(tmp_path / "user/.aws/config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "user/.aws/credentials"),
               AWS_EC2_METADATA_DISABLED="true")
    (tmp_path / "user").mkdir()
    return env


# -- doctor ----------------------------------------------------------------------------------
def test_doctor_names_what_is_missing_for_a_provider_and_exits_1(user):
    proc = run_cli("doctor", "-p", "sagemaker", env=user)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "sagemaker (aws): not ready" in out
    assert re.search(r"credentials\s+missing: none found \(looked in: AWS_ACCESS_KEY_ID", out)
    assert re.search(r"settings\s+missing: not set: providers.sagemaker.role_arn, providers.sagemaker.output_s3", out)
    assert "cloudtrain config set -p sagemaker role_arn=" in out


def test_doctor_is_ready_once_credentials_and_settings_are_there_and_never_prints_a_key(user, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("providers:\n  sagemaker: {role_arn: 'arn:aws:iam::123456789012:role/t', "
                      "output_s3: 's3://b/out', region: us-east-1}\n")
    env = dict(user, AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY=SECRET)
    proc = run_cli("doctor", "-p", "sagemaker", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sagemaker (aws): ready" in proc.stdout
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment" in proc.stdout
    data = json.loads(run_cli("doctor", "-p", "sagemaker", "-o", "json", env=env, check=0).stdout)
    assert data[0]["ready"] is True and data[0]["settings"]["status"] == "ok"
    for text in (proc.stdout, proc.stderr, json.dumps(data)):
        assert SECRET not in text and "AKIAIOSFODNN7EXAMPLE" not in text


def test_doctor_finds_a_profile_in_the_aws_files_and_a_kubeconfig(user, tmp_path):
    aws = tmp_path / "user" / ".aws"
    aws.mkdir()
    (aws / "config").write_text("[profile dev]\nsso_session = x\nregion = eu-west-1\n")
    kube = tmp_path / "kubeconfig"
    kube.write_text("apiVersion: v1\nkind: Config\n")
    data = json.loads(run_cli("doctor", "-o", "json", env=dict(user, AWS_PROFILE="dev", KUBECONFIG=str(kube)),
                              check=0).stdout)
    by = {d["provider"]: d for d in data}
    assert by["sagemaker"]["credentials"]["status"] == "ok" and "'dev'" in by["sagemaker"]["credentials"]["detail"]
    assert by["volcano"]["credentials"]["status"] == "ok" and str(kube) in by["volcano"]["credentials"]["detail"]
    assert by["local"]["ready"] is True
    assert by["tione"]["credentials"]["status"] == "missing"


def test_doctor_online_makes_one_read_call_against_the_double_and_exit_3_when_it_fails(user, tmp_path):
    from doubles.aws_double import AwsDouble
    server = AwsDouble().start()  # empty: moto's state is global to this worker's process
    endpoint = server.endpoint
    try:
        config = tmp_path / "config.yaml"
        config.write_text("providers:\n  sagemaker: {role_arn: 'arn:aws:iam::123456789012:role/t', "
                          "output_s3: 's3://b/out', region: us-east-1}\n")
        env = dict(user, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=endpoint,
                   AWS_DEFAULT_REGION="us-east-1")
        proc = run_cli("doctor", "-p", "sagemaker", "--online", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert re.search(r"online\s+ok: listed 0 jobs", proc.stdout)
    finally:
        server.stop()
    gone = run_cli("doctor", "-p", "sagemaker", "--online", env=dict(env, AWS_MAX_ATTEMPTS="1"), timeout=300)
    assert gone.returncode == 3, gone.stdout + gone.stderr
    assert re.search(r"online\s+failed: ", gone.stdout)


def test_doctor_refuses_an_unknown_provider(user):
    proc = run_cli("doctor", "-p", "sagemkaer", env=user)
    assert proc.returncode == 2 and "sagemaker" in proc.stderr


# -- completion ------------------------------------------------------------------------------
def complete_bash(script, words):
    """What bash completes for ``words`` (the last one being completed)."""
    line = " ".join(words)
    program = (f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _cloudtrain_complete; "
               "printf '%s\\n' \"${COMPREPLY[@]}\"")
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_bash_completion_completes_commands_options_providers_and_choices(tmp_path):
    script = run_cli("completion", "bash", check=0).stdout
    assert {"submit", "doctor", "prune"} <= set(complete_bash(script, ["cloudtrain", "''"]))
    assert complete_bash(script, ["cloudtrain", "pr"]) == ["providers", "prune"]
    assert "--dry-run" in complete_bash(script, ["cloudtrain", "submit", "--d"])
    assert complete_bash(script, ["cloudtrain", "submit", "-p", "sage"]) == ["sagemaker"]
    assert complete_bash(script, ["cloudtrain", "render", "-o", "''"]) == ["yaml", "json"]
    assert complete_bash(script, ["cloudtrain", "completion", "''"]) == ["bash", "zsh", "fish"]


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_bash_and_zsh_scripts_pass_shellcheck(shell, tmp_path):
    path = tmp_path / f"c.{shell}"
    path.write_text(run_cli("completion", shell, check=0).stdout)
    # zsh's bashcompinit bridge: the script is bash as far as shellcheck knows
    proc = subprocess.run(["shellcheck", "-s", "bash", "-e", "SC2207", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_fish_completion_names_every_command_and_the_providers():
    out = run_cli("completion", "fish", check=0).stdout
    for command in ("submit", "doctor", "completion", "init", "prune", "outputs"):
        assert f"-a {command} " in out
    assert re.search(r"__fish_seen_subcommand_from submit' -s p -l provider -x -a '[^']*sagemaker", out)


# -- init ------------------------------------------------------------------------------------
def test_init_writes_a_starter_that_validates_and_runs_here(tmp_path, home):
    project = tmp_path / "My Project"
    project.mkdir()
    (project / "train.py").write_text('import os\nprint("hello from rank", os.environ["RANK"])\n')
    (project / "requirements.txt").write_text("")
    proc = run_cli("init", cwd=project, check=0)
    text = (project / "job.yaml").read_text()
    assert "name: my-project" in text and "command: python train.py" in text
    assert "setup: pip install -r requirements.txt" in text  # a requirements file: installed on every node
    run_cli("validate", "job.yaml", cwd=project, check=0)
    assert "hello from rank 0" in run_cli("submit", "job.yaml", "--set", "setup=true", cwd=project, check=0).stdout
    assert "job.yaml" in proc.stdout


def test_init_never_overwrites_and_says_so(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "job.yaml").write_text("mine\n")
    proc = run_cli("init", cwd=tmp_path)
    assert proc.returncode == 2 and "never overwrites" in proc.stderr
    assert (tmp_path / "job.yaml").read_text() == "mine\n"


def test_init_detects_the_entry_point_and_its_distribution(tmp_path):
    (tmp_path / "utils.py").write_text("X = 1\n")
    (tmp_path / "pretrain_llm.py").write_text("import deepspeed\nif __name__ == '__main__':\n    pass\n")
    run_cli("init", "--name", "llm", cwd=tmp_path, check=0)
    text = (tmp_path / "job.yaml").read_text()
    assert "command: python pretrain_llm.py" in text and re.search(r"type: deepspeed\b", text)
    assert "name: llm" in text


def test_init_without_a_script_asks_for_one(tmp_path):
    proc = run_cli("init", cwd=tmp_path)
    assert proc.returncode == 2 and "cloudtrain init SCRIPT.py" in proc.stderr
    assert not (tmp_path / "job.yaml").exists()


# -- prune -----------------------------------------------------------------------------------
def test_prune_removes_old_finished_runs_and_never_a_running_one(tmp_path, home):
    from cloudtrain.runtime.store import Store
    job = write_job(tmp_path, 'name: quick\ncommand: [python, -c, "print(1)"]\ndistribution: {type: none}\n')
    finished = run_cli("submit", job, "--detach", check=0).stdout.strip()
    assert run_cli("wait", finished).returncode == 0
    recent = run_cli("submit", job, "--detach", check=0).stdout.strip()
    assert run_cli("wait", recent).returncode == 0
    sleeper = write_job(tmp_path / "s", 'name: sleeper\ncommand: [python, -c, "import time; time.sleep(300)"]\n'
                                        'distribution: {type: none}\n')
    running = run_cli("submit", sleeper, "--detach", check=0).stdout.strip()
    store = Store(home / "state.db")
    week_ago = time.time() - 8 * 86400
    for handle in (finished, running):  # the running one made to look as old as can be
        store.update_job(handle.split("://")[1], created_at=week_ago, ended_at=week_ago if handle == finished else None)
    dirs = {h: home / "runs" / h.split("://")[1] for h in (finished, recent, running)}
    dry = run_cli("prune", "--older-than", "7d", "--dry-run", check=0).stdout
    assert f"would remove {finished}" in dry and all(d.exists() for d in dirs.values())
    proc = run_cli("prune", "--older-than", "7d", check=0)
    assert f"removed {finished}" in proc.stdout and "1 finished run older than 7d" in proc.stdout
    assert not dirs[finished].exists() and dirs[recent].exists() and dirs[running].exists()
    assert run_cli("status", running, check=0).stdout.startswith(f"{running}  RUNNING")
    assert run_cli("status", finished).returncode == 2  # forgotten with its directory
    run_cli("cancel", running, check=0)


def test_prune_refuses_a_bad_age(home):
    proc = run_cli("prune", "--older-than", "soon")
    assert proc.returncode == 2 and "--older-than" in proc.stderr


# -- colour ----------------------------------------------------------------------------------
def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path):
    """A pseudo-terminal gets colour, NO_COLOR and a pipe never do."""
    import pty
    import sys
    job = write_job(tmp_path, "name: Bad_Name\ncommand: python t.py\n")

    def on_a_tty(extra):
        env = dict(os.environ, **extra)
        env.pop("FORCE_COLOR", None)
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(sys.executable, [sys.executable, "-m", "cloudtrain", "validate", str(job)], env)
        chunks = []
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        os.waitpid(pid, 0)
        return b"".join(chunks).decode()

    assert "\033[31merror:\033[0m" in on_a_tty({"TERM": "xterm"})
    assert "\033[" not in on_a_tty({"TERM": "xterm", "NO_COLOR": "1"})
    piped = run_cli("validate", job, env={"TERM": "xterm"})
    assert piped.returncode == 2 and "\033[" not in piped.stderr and "cloudtrain: error: " in piped.stderr
