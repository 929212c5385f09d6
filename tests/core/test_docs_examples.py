"""Every command example in docs/ stays true: each ``$ cloudtrain ...`` line of a console block
that runs offline (``--help``, ``providers``, ``schema``, ``completion``, ``config set``/``path``,
``validate``/``render`` of a job file in the repository) is run, and what it prints is compared in
shape with what the page shows (the flags and commands of a help text, a table's columns and
rows, a JSON document's keys, the fields errors are reported at, the lines of a short answer).
Examples that need a job running, a cloud or a file only the page has are left out (``skipped``
below lists why; the test fails if no example at all is run)."""
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
OFFLINE = {"providers", "schema", "completion", "validate", "render"}


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
    """None when the example runs offline here; else why not."""
    command = re.sub(r"\s+#.*$", "", example.command)
    if SHELL_SYNTAX.search(command):
        return "shell syntax (pipes, variables, redirections)"
    words = shlex.split(command)
    if "--help" in words or words[1:] == ["-h"]:
        return None
    sub = words[1] if len(words) > 1 else ""
    if sub == "config":
        return None if len(words) > 2 and words[2] in ("set", "path") else "reads the user's own settings"
    if sub not in OFFLINE:
        return f"`{sub}` needs a job or a platform"
    if sub in ("validate", "render"):
        jobs = [w for w in words[2:] if w.endswith((".yaml", ".yml"))]
        if not jobs or not all((ROOT / j).is_file() for j in jobs):
            return "its job file is the page's own"
    return None


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


def run(example: Example, tmp: Path) -> subprocess.CompletedProcess:
    command = re.sub(r"\s+#.*$", "", example.command)
    argv = shlex.split(command)[1:]
    if argv and argv[0] == "schema" and ">" in command:
        argv = ["schema"]
    return subprocess.run([sys.executable, "-m", "cloudtrain", *argv], capture_output=True, text=True, cwd=ROOT,
                          env=environment(tmp, example.config), timeout=300)


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
        if elided:
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


@pytest.mark.parametrize("page", sorted({e.page for e in RUNNABLE}))
def test_every_offline_example_prints_what_the_page_shows(page, tmp_path):
    problems = []
    for example in (e for e in RUNNABLE if e.page == page):
        # a block's commands share their settings (config set, then validate)
        block = tmp_path / f"block-{example.block}"
        block.mkdir(exist_ok=True)
        proc = run(example, block)
        why = compare(example, proc.stdout, proc.stderr)
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
