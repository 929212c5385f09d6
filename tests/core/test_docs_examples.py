"""Every command example in docs/ and the README stays true: each ``$ cloudtrain ...`` line of a
console block that runs offline (``--help``, ``providers``, ``schema``, ``completion``, ``resources``,
``list`` on an empty home, ``config set``/``path``, ``validate``/``render`` of a job file in the
repository) is run in a temporary CLOUDTRAIN_HOME, and what it prints is compared in shape with what
the page shows (the flags and commands of a help text, a table's columns and rows, a JSON
document's keys, the fields errors are reported at, the lines of a short answer).  Examples that
need a job running, a cloud or a file only the page has are left out by design: ``SKIPPED_BY_DESIGN``
and ``runnable`` say why for each, and an example whose command is in neither fails the test.

Every example runs in one Python process (``cloudtrain.commands.cli.main`` per example,
each with its own environment and captured output), not one process each: the whole test adds a
few seconds to CI (issue 44 item 11)."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SHELL_SYNTAX = re.compile(r"[|<>`]|\$\(|\$[A-Za-z{]|&&|;")
OFFLINE = {"providers", "schema", "completion", "validate", "render", "resources", "list"}
# The commands the docs show that this test does not run, and why (every example that is not run
# says which reason left it out; a command in neither set fails test_every_example_is_run_or_left_out_by_design).
SKIPPED_BY_DESIGN = {
    "submit": "starts a job (tests/e2e runs the examples' jobs for real)",
    "status": "needs a job the page started (its handle)",
    "logs": "needs a job the page started (its handle)",
    "wait": "needs a job the page started (its handle)",
    "cancel": "needs a job the page started (its handle)",
    "outputs": "needs a job the page started (its handle)",
    "stage": "uploads the job's code to a cloud's object store",
    "doctor": "reads this machine's cloud credentials (tests/core/test_doctor_and_config_settings.py)",
    "ui": "starts the dashboard's web server (tests/ui)",
    "controller": "starts or asks the controller daemon (tests/controller)",
    "launch": "runs inside a node, in its platform's environment (tests/core/test_launch_*.py)",
    "catalog": "reads a platform's price API",
    "init": "writes a job.yaml into the page's own directory",
    "prune": "removes the page's runs",
    "exec": "needs a job the page started (its handle)",
    "stacks": "needs a job the page started (its handle)",
}
# Why an example of an offline command is left out (besides SKIPPED_BY_DESIGN's)
OTHER_REASONS = ("shell syntax (pipes, variables, redirections)", "reads the user's own settings",
                 "its job file is the page's own", "its rows are the page's own jobs (an empty home lists none)",
                 "asks a cloud for its jobs", "names a provider the page's own plugin adds")


@dataclass
class Example:
    page: str
    line: int
    command: str
    shown: List[str] = field(default_factory=list)
    block: int = 0
    # the user config the page showed last (a block starting "# ~/.cloudtrain/config.yaml")
    config: Optional[str] = None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def examples() -> List[Example]:
    found: List[Example] = []
    pages = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]
    for page in pages:
        lines = page.read_text(encoding="utf-8").splitlines()
        in_block, current, block, config, collecting = False, None, 0, None, None
        i = 0
        while i < len(lines):
            text = lines[i]
            if text.lstrip().startswith("```"):
                if collecting is not None:
                    config, collecting = "\n".join(collecting) + "\n", None
                in_block, current = not in_block, None
                block += 1
                if in_block and i + 1 < len(lines) and lines[i + 1].strip() == "# ~/.cloudtrain/config.yaml":
                    collecting = []
                i += 1
                continue
            if collecting is not None:
                collecting.append(text)
            if in_block and text.startswith("$ "):
                command, start = text[2:], i
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                current = None
                if command.startswith("cloudtrain ") or command == "cloudtrain":
                    current = Example(str(page.relative_to(ROOT)), start + 1, command, block=block, config=config)
                    found.append(current)
            elif in_block and current is not None:
                current.shown.append(text)
            i += 1
    return found


def runnable(example: Example) -> Optional[str]:
    """None when the example runs offline here; else why not (a reason of SKIPPED_BY_DESIGN or
    OTHER_REASONS, or an unknown command's)."""
    command = re.sub(r"\s+#.*$", "", example.command)
    words = shlex.split(command.replace("$(", " ").replace("`", " ")) if SHELL_SYNTAX.search(command) \
        else shlex.split(command)
    sub = words[1] if len(words) > 1 else ""
    if sub in SKIPPED_BY_DESIGN and not {"--help", "-h"} & set(words):
        return SKIPPED_BY_DESIGN[sub]
    if SHELL_SYNTAX.search(command) and not (sub == "schema" and command.endswith("> job.schema.json")):
        return OTHER_REASONS[0]
    if "--help" in words or words[1:] == ["-h"] or words[1:] == ["--help"]:
        return None
    if sub == "config":
        return None if len(words) > 2 and words[2] in ("set", "path") else OTHER_REASONS[1]
    if sub not in OFFLINE:
        return f"`{sub}`: a command this test does not know: run it here, or add it to SKIPPED_BY_DESIGN"
    if sub in ("validate", "render"):
        jobs = [w for w in words[2:] if w.endswith((".yaml", ".yml"))]
        if not jobs or not all((ROOT / j).is_file() for j in jobs):
            return OTHER_REASONS[2]
    if sub == "list":
        if "json" in words:
            return OTHER_REASONS[3]
        if "-p" in words or "--provider" in words or "--refresh" in words:
            return OTHER_REASONS[4] if not _page_plugin(words) else OTHER_REASONS[5]
    if sub in ("resources", "providers", "render", "validate") and _page_plugin(words):
        return OTHER_REASONS[5]
    return None


def _page_plugin(words: List[str]) -> bool:
    """The command names a provider that is not installed here (plugins.md's ``acme``)."""
    from cloudtrain.extend.plugins import providers
    named = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-p", "--provider")]
    return any(p not in providers() for n in named for p in n.split(","))


def environment(tmp: Path, shown_config: Optional[str] = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AZURE_", "TENCENTCLOUD_", "HUAWEICLOUD_", "CLOUDTRAIN_", "KUBE"))}
    config = tmp / "config.yaml"
    if not config.exists():
        config.write_text(shown_config or "{}\n")
    env.update(CLOUDTRAIN_HOME=str(tmp / "home"), CLOUDTRAIN_CONFIG=str(config), HOME=str(tmp / "user"),
               AWS_CONFIG_FILE=str(tmp / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp / "none"), COLUMNS="100",
               NO_COLOR="1", AWS_EC2_METADATA_DISABLED="true")
    (tmp / "user").mkdir(exist_ok=True)
    return env


# One process runs every example: main(argv) each, with the example's environment and
# working directory, its stdout and stderr captured apart (a warning the CLI shows is printed to
# the stderr of its call: cloudtrain's warnings filter is "always").
DRIVER = r"""
import contextlib, io, json, os, sys
from cloudtrain.commands.cli import main
results = []
for item in json.load(sys.stdin):
    os.environ.clear()
    os.environ.update(item["env"])
    os.chdir(item["cwd"])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(item["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except Exception as exc:  # the CLI's own handler turns errors into lines: this is a bug
            code = repr(exc)
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
json.dump(results, sys.__stdout__)
"""


@dataclass
class Ran:
    code: object
    stdout: str
    stderr: str


def argv_of(example: Example) -> List[str]:
    command = re.sub(r"\s+#.*$", "", example.command)
    if command.endswith("> job.schema.json"):
        command = command[:-len("> job.schema.json")]
    return shlex.split(command)[1:]


def run_all(found: List[Example], tmp: Path) -> List[Ran]:
    """Run ``found`` in one process, in order; the examples of one console block share a temporary
    home and config (a block's commands share their settings: config set, then validate)."""
    items = []
    for example in found:
        block = tmp / f"{example.page.replace('/', '-')}-block-{example.block}"
        block.mkdir(exist_ok=True)
        items.append({"argv": argv_of(example), "env": environment(block, example.config), "cwd": str(ROOT)})
    proc = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(items), capture_output=True, text=True,
                          cwd=ROOT, env=environment(tmp), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [Ran(**r) for r in json.loads(proc.stdout)]


# -- shapes ------------------------------------------------------------------------------------
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
ERROR = re.compile(r"^cloudtrain: (error|warning): (?:[^ ]+?(?::\d+)?: )?([\w.\[\]-]+): ")


def help_shape(text: str):
    flags = set(FLAG.findall(text))
    commands = {m.group(1) for m in re.finditer(r"^    ([a-z][\w-]*)(?:\s|$)", text, re.M)}
    return flags, commands


def json_shape(value):
    if isinstance(value, list):
        return ["list", json_shape(value[0]) if value else None]
    if isinstance(value, dict):
        return sorted(value)
    return type(value).__name__


def table_shape(lines: List[str]):
    header = re.split(r"\s{2,}", lines[0].strip())
    firsts = sorted(re.split(r"\s{2,}", line.strip())[0] for line in lines[1:] if line.strip())
    return header, firsts


def skeleton(line: str) -> str:
    line = re.sub(r"\S*/\S*?(?=[:\s,)]|$)", "<path>", line)
    return re.sub(r"\d+(?:\.\d+)?", "<n>", line)


def compare(example: Example, out: str, err: str) -> Optional[str]:
    """Why what ran differs in shape from what the page shows, or None."""
    shown = [line for line in example.shown if line.strip()]
    if not shown:
        return None
    text = "\n".join(example.shown)
    elided = any(line.strip() in ("...", "…") for line in shown)
    actual_text = out if out.strip() else err
    if shown[0].startswith("usage:"):
        if help_shape(text) != help_shape(out):
            want, got = help_shape(text), help_shape(out)
            return (f"help differs: flags only shown {sorted(want[0] - got[0])}, "
                    f"only printed {sorted(got[0] - want[0])}; "
                    f"commands only shown {sorted(want[1] - got[1])}, only printed {sorted(got[1] - want[1])}")
        return None
    if shown[0].lstrip().startswith(("{", "[")) and not elided:
        try:
            want = json_shape(json.loads(text))
        except ValueError:
            return None
        got = json_shape(json.loads(out))
        return None if want == got else f"JSON keys differ: shown {want}, printed {got}"
    if all(line.startswith(("cloudtrain: error:", "cloudtrain: warning:")) for line in shown):
        want = [m.groups() for m in map(ERROR.match, shown) if m]
        got = [m.groups() for m in map(ERROR.match, err.splitlines()) if m]
        return None if want == got else f"errors at other fields: shown {want}, printed {got}"
    if re.match(r"^[A-Z][A-Z_]+(\s{2,}[A-Z][A-Z_]+)+\s*$", shown[0]):
        want, got = table_shape(shown), table_shape([line for line in out.splitlines() if line.strip()])
        if elided or argv_of(example)[:1] == ["list"]:  # list: the rows are the page's jobs, the home is empty
            want, got = (want[0], []), (got[0], [])
        elif "providers" in example.command.split() and not set(want[1]) <= set(got[1]):
            # a page's own plugin (plugins.md's acme) is not installed here: the rows of those that are
            want = (want[0], sorted(set(want[1]) & set(got[1])))
            got = (got[0], sorted(set(want[1]) & set(got[1])))
        return None if want == got else f"table differs: shown {want}, printed {got}"
    if elided or any(re.match(r"^\s*[\w./-]+:(\s|$)", line) for line in shown[:1]) and len(shown) > 3:
        def keys(lines):
            return {m.group(1) for m in (re.match(r"^\s*([\w./-]+):(\s|$)", line) for line in lines) if m}
        missing = keys(shown) - keys(actual_text.splitlines())
        return None if not missing else f"keys shown but not printed: {sorted(missing)}"
    want = [skeleton(line) for line in shown]
    got = [skeleton(line) for line in actual_text.splitlines() if line.strip()]
    return None if want == got else f"lines differ:\n  shown:   {want}\n  printed: {got}"


ALL = examples()
RUNNABLE = [e for e in ALL if runnable(e) is None]


def test_the_pages_have_runnable_examples():
    assert len(RUNNABLE) >= 15, [e.id for e in RUNNABLE]


def test_every_example_is_run_or_left_out_by_design():
    """No example is left out in silence: each one not run names a reason of SKIPPED_BY_DESIGN or
    OTHER_REASONS (a command new to the docs fails here until it is run or its reason is written)."""
    known = set(SKIPPED_BY_DESIGN.values()) | set(OTHER_REASONS)
    unknown = [f"{e.id}: $ {e.command}: {runnable(e)}" for e in ALL if runnable(e) not in known | {None}]
    assert not unknown, "\n".join(unknown)


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """Every runnable example, run once in one process: ``{example id: Ran}``."""
    tmp = tmp_path_factory.mktemp("docs-examples")
    results = {}
    found = RUNNABLE
    for example, result in zip(found, run_all(found, tmp)):
        results[example.id] = result
    return results


@pytest.mark.parametrize("page", sorted({e.page for e in RUNNABLE}))
def test_every_offline_example_prints_what_the_page_shows(page, ran):
    problems = []
    for example in (e for e in RUNNABLE if e.page == page):
        result = ran[example.id]
        if not isinstance(result.code, int):
            problems.append(f"{example.id}: $ {example.command}\n  raised {result.code}")
            continue
        why = compare(example, result.stdout, result.stderr)
        if why:
            problems.append(f"{example.id}: $ {example.command}\n  {why}")
    assert not problems, "\n".join(problems)


def test_the_emulate_list_of_getting_started_names_every_provider():
    from cloudtrain.extend.plugins import providers
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    sentence = re.search(r"that is every one: (.*?)\.\s", text, re.S).group(1)
    listed = set(re.findall(r"`([a-z0-9-]+)`", sentence))
    assert listed == set(providers()) - {"fakeone"}


def test_every_status_json_example_has_every_field_status_prints():
    from cloudtrain.providers.provider import JobStatus, State
    fields = set(JobStatus(handle="local://x", state=State.RUNNING).to_dict())
    shown = [(page, line) for page in sorted(DOCS.rglob("*.md"))
             for line in page.read_text(encoding="utf-8").splitlines()
             if line.startswith('{"handle": ')]
    assert shown
    for page, line in shown:
        assert set(json.loads(line)) == fields, f"{page.relative_to(ROOT)}: {line}"
