"""Issue 39, item 8: the smaller holes, each with the input that showed it.

- a catalog under ``$CLOUDTRAIN_HOME/catalogs`` cut short: one warning naming it, the shipped
  catalog read instead (no traceback); a catalog file that does not read is one error line;
- ``resources --refresh -p ec2`` with no ``--out`` writes under ``$CLOUDTRAIN_HOME``, never into
  the installed package;
- a credential written into ``setup`` or ``command``: a warning at validate with the field and
  its line, never the value;
- more credential files stay home;
- a job's terminal escapes reach no terminal from ``logs`` and ``submit`` (the log keeps them).
"""
import hashlib
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_env, run_cli, write_job
from cloudtrain.transfer.codetree import is_credential


# -- catalogs ----------------------------------------------------------------------------------
def shipped_ec2() -> Path:
    import cloudtrain_aws
    return Path(cloudtrain_aws.__file__).parent / "catalogs" / "ec2.json"


def test_a_truncated_catalog_of_the_users_is_a_warning_and_the_shipped_one_is_read(home):
    mine = home / "catalogs" / "ec2.json"
    mine.parent.mkdir(parents=True)
    mine.write_text(shipped_ec2().read_text()[:300])  # a refresh cut short by a full disk
    proc = run_cli("resources", "-p", "ec2", "--accelerator", "A100")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "p4d.24xlarge" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and str(mine) in warnings[0], proc.stderr


def test_a_catalog_file_that_does_not_read_is_one_line_naming_it(tmp_path):
    from cloudtrain.catalogs import catalog
    from cloudtrain.spec.errors import BadInput
    broken = tmp_path / "x.json"
    broken.write_text('{"catalog": "x", "rows": [{"instance_type": "a"')
    with pytest.raises(BadInput) as said:
        catalog.load(str(broken))
    assert str(broken) in str(said.value) and "\n" not in str(said.value)


def test_a_catalog_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from cloudtrain.catalogs import catalog
    path = tmp_path / "c.json"
    path.write_text("old\n")

    def full(fd):  # the disk fills up while the new catalog is written
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        catalog.write_text(str(path), '{"rows": []}\n' * 1000)
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["c.json"]
    monkeypatch.undo()
    catalog.write_text(str(path), '{"rows": []}\n')
    assert path.read_text() == '{"rows": []}\n'


def test_a_refresh_without_out_writes_under_the_home_not_into_the_package(home, aws_server):
    before = hashlib.sha256(shipped_ec2().read_bytes()).hexdigest()
    mtime = shipped_ec2().stat().st_mtime_ns
    proc = run_cli("resources", "--refresh", "-p", "ec2", env=aws_server.env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(home / "catalogs" / "ec2.json"), str(home / "catalogs" / "sagemaker.json")]
    assert hashlib.sha256(shipped_ec2().read_bytes()).hexdigest() == before
    assert shipped_ec2().stat().st_mtime_ns == mtime
    assert (home / "catalogs").stat().st_mode & 0o077 == 0


# -- credentials in setup and command ------------------------------------------------------------
@pytest.mark.parametrize("field, text, what", [
    ("setup", "pip install -r requirements.txt && huggingface-cli login --token hf_" + "Ab3" * 12,
     "Hugging Face token"),
    ("setup", "export WANDB_API_KEY=0f1e2d3c4b5a69788796a5b4c3d2e1f0 && pip install wandb", "WANDB_API_KEY"),
    ("command", "python train.py --db-password Hunter2Hunter2", "db-password"),
    # (one command: a string with && is refused as shell syntax, tests/core/test_shell_commands.py)
    ("command", "python train.py --repo https://me:pAssW0rd99@git.example.com/repo", "user info"),
])
def test_a_credential_in_setup_or_command_is_a_warning_with_its_line_and_never_its_value(tmp_path, field, text, what):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)\n")
    secret = re.search(r"hf_\w+|0f1e2d\w+|Hunter2\w+|pAssW0rd99", text).group()
    other = "python train.py" if field == "setup" else None
    lines = ["name: leaky", "code: code", f"command: {other or repr(text)}"]
    if field == "setup":
        lines.append(f"setup: {text!r}")
    lines.append("distribution: {type: none, nodes: 1}")
    job = write_job(tmp_path, "\n".join(lines) + "\n")
    proc = run_cli("validate", "-p", "local", job)
    assert proc.returncode == 0, proc.stderr
    line = 3 if field == "command" else 4
    warned = [w for w in proc.stderr.splitlines() if "warning" in w and f":{line}: {field}" in w]
    assert warned and what in warned[0] and "secrets:" in warned[0], proc.stderr
    assert secret not in proc.stdout + proc.stderr


def test_a_command_that_refers_to_a_secret_by_name_is_not_warned_about(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    job = write_job(tmp_path, """
        name: fine
        code: code
        command: [bash, -c, 'python train.py --token "$HF_TOKEN" --tokenizer bert-base-uncased --lr 0.001']
        setup: export WANDB_API_KEY="${WANDB_KEY}" && pip install -r requirements.txt
        distribution: {type: none, nodes: 1}
    """)
    proc = run_cli("validate", "-p", "local", job)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr


# -- credential files ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [
    ".vault-token", "home/.terraform.d/credentials.tfrc.json", ".terraformrc", ".config/rclone/rclone.conf",
    "app/.streamlit/secrets.toml", ".mylogin.cnf", "certs/server.jks", "deploy/release.keystore", "site/.htpasswd",
    ".bash_history", ".zsh_history", "old/.python_history", ".local/share/fish/fish_history", ".psql_history",
    "vault.kdbx"])
def test_more_credential_files_stay_home(path):
    assert is_credential(path)


@pytest.mark.parametrize("path", ["history.py", "loss_history.csv", "train/keystore_utils.py", "rclone.py"])
def test_names_near_them_still_ship(path):
    assert not is_credential(path)


# -- terminal escapes ----------------------------------------------------------------------------
HOSTILE = ("print('before \\x1b]52;c;cHduZWQ=\\x07 \\x1b[2J\\x1b[1;1H title\\x1b]0;owned\\x07 "
           "\\x9b31m end\\r\\nnext\\ttab')")


def on_a_terminal(args, env=None, timeout=300):
    """``cloudtrain ARGS`` with its stdout and stderr on a pseudo-terminal; everything it wrote there."""
    main, side = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cloudtrain", *map(str, args)], stdin=subprocess.DEVNULL,
                            stdout=side, stderr=side, env=cli_env(env), close_fds=True)
    os.close(side)
    got = b""
    while True:
        ready, _, _ = select.select([main], [], [], timeout)
        assert ready, "the command stopped writing"
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the other side closed: the command ended
            break
        if not chunk:
            break
        got += chunk
    os.close(main)
    assert proc.wait(timeout=60) == 0, got
    return got.decode("utf-8", "replace")


def test_a_jobs_terminal_escapes_reach_no_terminal_from_submit_or_logs(tmp_path, home):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(HOSTILE + "\n")
    job = write_job(tmp_path, "name: esc\ncode: code\ncommand: python3 train.py\n"
                              "distribution: {type: none, nodes: 1}\n")
    shown = on_a_terminal(["submit", "-p", "local", job])
    handle = re.search(r"submitted (\S+)", shown).group(1)
    logs = on_a_terminal(["logs", handle])
    for text in (shown, logs):
        # cloudtrain's own live status line on a terminal: "\r\x1b[K" clears it before each line of
        # the job (commands/progress.py StatusLine.log), and may fall between two of the job's
        # lines; a job's own bytes reach the terminal only neutralised, never as "\r\x1b[K"
        text = text.replace("\r\x1b[K", "\r")
        job_part = text[text.index("before"):text.index("tab") + 3]
        assert "\x1b" not in job_part and "\x9b" not in job_part and "\x07" not in job_part
        assert "^[]52;c;cHduZWQ=^G" in job_part and "^[[2J" in job_part and "<U+009B>31m" in job_part
        assert "next\ttab" in job_part
    # a pipe, and the log file, keep the bytes as the job wrote them
    piped = run_cli("logs", handle)
    assert "\x1b]52;c;cHduZWQ=\x07" in piped.stdout and "\x9b31m" in piped.stdout
