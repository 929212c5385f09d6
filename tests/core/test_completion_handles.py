"""Shell completion of what only the ledger knows (issue 44, item 10): ``status <TAB>`` and the
other commands that take a handle complete the jobs' handles, ``list --state <TAB>`` the states.
Through bash itself, running the script ``cloudtrain completion bash`` prints, with the words
split as bash splits them (at ``:`` too: COMP_WORDBREAKS)."""
import os
import re
import subprocess
import sys

import pytest

from conftest import run_cli
from test_run_retention import ended_run

STATES = ["PENDING", "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]


def complete(script, line: str, home):
    """What bash offers for ``line`` (the cursor at its end), with COMP_WORDS, COMP_CWORD,
    COMP_LINE and COMP_POINT as bash sets them: words split at blanks and at ':'."""
    words = [w for w in re.split(r"(\s+|:)", line) if w and not w.isspace()]
    if line.endswith(" "):
        words.append("")
    array = " ".join("''" if not w else "'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; "
               f"COMP_POINT={len(line)}; _cloudtrain_complete; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    env = dict(os.environ, CLOUDTRAIN_HOME=str(home),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.split("\n") if w]


@pytest.fixture(scope="module")
def script():
    return run_cli("completion", "bash", check=0).stdout


def test_commands_that_take_a_handle_complete_the_ledgers_handles(script, home):
    first, _ = ended_run(home, "first", 2)
    second, _ = ended_run(home, "second", 1)
    assert subprocess.run([sys.executable, "-m", "cloudtrain", "completion", "--handles"], capture_output=True,
                          text=True, env=dict(os.environ, CLOUDTRAIN_HOME=str(home))).stdout.split() == \
        [second, first]  # newest first
    for command in ("status", "logs", "wait", "cancel", "outputs"):
        assert sorted(complete(script, f"cloudtrain {command} ", home)) == sorted([first, second]), command
    # bash replaces the part after the word's last ':', so that is what is offered
    assert sorted(complete(script, "cloudtrain status local:", home)) == \
        sorted(h.split(":", 1)[1] for h in (first, second))
    assert complete(script, "cloudtrain status local://sec", home) == ["//" + second.split("://")[1]]
    assert complete(script, "cloudtrain logs -f local://fir", home) == ["//" + first.split("://")[1]]
    assert complete(script, "cloudtrain status docker://", home) == []
    # a job file still completes as a file name
    assert complete(script, "cloudtrain submit --dry", home) == ["--dry-run"]


def test_no_state_yet_offers_no_handle_and_makes_no_home(script, tmp_path):
    home = tmp_path / "none"
    assert complete(script, "cloudtrain status ", home) == []
    assert not home.exists()


def test_list_state_completes_the_states_one_item_of_a_list_at_a_time(script, tmp_path):
    assert complete(script, "cloudtrain list --state ", tmp_path) == STATES
    assert complete(script, "cloudtrain list --state RUN", tmp_path) == ["RUNNING"]
    assert complete(script, "cloudtrain list --state RUNNING,F", tmp_path) == ["RUNNING,FAILED"]
    assert complete(script, "cloudtrain list -p local,doc", tmp_path) == ["local,docker"]
    assert complete(script, "cloudtrain resources -p sage", tmp_path) == ["sagemaker"]


def test_fish_completes_handles_and_states():
    out = run_cli("completion", "fish", check=0).stdout
    assert re.search(r"__fish_seen_subcommand_from status' -a '\(cloudtrain completion --handles", out)
    assert re.search(r"__fish_seen_subcommand_from list' -l state -x -a 'PENDING STARTING RUNNING", out)
    assert "--handles" not in re.sub(r"\(cloudtrain completion --handles[^)]*\)", "", out)  # not offered to people
