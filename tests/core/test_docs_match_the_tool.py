"""issue 44 items 2 and 11: what the docs say about installing and about the example job file is
what pyproject and the example hold.

- docs/index.md's table of extras has exactly pyproject's extras, and each row names every
  package (and every extra) its extra brings;
- a YAML block that names an example's file in its first line (``# examples/X/job.yaml``) shows
  that file's fields as they are (the README's snippet had lost ``image:``);
- the Quickstart says what its pip downloads (PyPI's torch is the CUDA build on Linux) and the
  CPU-only way, and its command (which CI runs as written, scripts/quickstart-check.sh) stays
  pinned to PyPI's torch==2.13.0, not PyTorch's index.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def extras() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def index_table() -> dict:
    """``{extra: its "brings" cell}`` of docs/index.md's table of extras."""
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    table = text[text.index("| extra | brings | for |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1]
    return rows


def test_index_md_lists_exactly_pyprojects_extras():
    assert set(index_table()) == set(extras())


@pytest.mark.parametrize("extra", sorted(extras()))
def test_each_extras_row_names_what_it_brings(extra):
    cell = index_table()[extra]
    named = set(re.findall(r"`([^`]+)`", cell))
    for requirement in extras()[extra]:
        inner = re.fullmatch(r"cloudtrain\[(.*)\]", requirement)
        if inner:  # another extra's: each is named
            wanted = set(inner.group(1).split(","))
        else:  # a package: its name, or the pin itself (torch==2.13.0)
            name = re.split(r"[<>=!~\[;]", requirement)[0]
            wanted = {name} if requirement not in named else set()
        assert wanted <= named, f"{extra}: {cell!r} does not name {sorted(wanted - named)} ({requirement})"
    if not extras()[extra]:
        assert cell.startswith("nothing"), cell


def example_blocks():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
            first = block.splitlines()[0]
            found = re.fullmatch(r"# (examples/\S+\.ya?ml)", first.strip())
            if found:
                yield pytest.param(page.relative_to(ROOT), found.group(1), block, id=f"{page.name}:{found.group(1)}")


@pytest.mark.parametrize("page, path, block", list(example_blocks()))
def test_a_snippet_of_an_example_file_shows_its_fields_as_they_are(page, path, block):
    assert yaml.safe_load(block) == yaml.safe_load((ROOT / path).read_text(encoding="utf-8")), \
        f"{page}: its {path} differs from the file"


def test_the_snippets_are_checked_at_all():
    assert {str(p.values[0]) for p in example_blocks()} >= {"README.md", "docs/getting-started.md"}


def quickstart() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("## Quickstart"):].split("\n## ", 1)[0]


def test_the_quickstart_says_what_pip_downloads_and_the_cpu_only_way():
    section = quickstart()
    command = re.search(r"```bash\n(.*?)\n", section).group(1)   # what CI runs (scripts/quickstart-check.sh)
    assert "'.[examples]'" in command and "download.pytorch.org" not in command
    assert "torch==2.13.0" in extras()["examples"]                 # CI's wheel house has only that one, CPU
    prose = section.replace(command, "")
    assert "CUDA" in prose and "nvidia-" in prose
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in prose
    install = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in install


def test_pyproject_no_longer_calls_pypis_torch_the_cpu_build():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    comment = text[:text.index("examples = [")].rsplit("\n\n", 1)[-1].rsplit("all = ", 1)[-1]
    assert "CUDA" in comment and "download.pytorch.org/whl/cpu" in comment


# -- cli.md's synopsis lines -------------------------------------------------------------------
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def synopses() -> dict:
    """``{command: [the flags of each "cloudtrain COMMAND ..." line of the text blocks of cli.md and
    configuration.md (config's own section)]}``; a
    line that joins commands (``status HANDLE | logs HANDLE ...``) and ``launch`` (its own parser,
    cloudtrain.launch.main, shown with ``...``) are left out."""
    found: dict = {}
    for page in ("cli.md", "configuration.md"):
        fence = None
        for line in (ROOT / "docs" / page).read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                fence = line[3:].strip() if fence is None else None
                continue
            m = re.match(r"cloudtrain ([a-z]+)\b(.*)$", line)
            if fence not in ("text", "") or not m or m.group(1) == "launch" or re.search(r"\| [a-z]+ HANDLE", line):
                continue
            found.setdefault(m.group(1), []).append(set(FLAG.findall(m.group(2))))
    return found


def options() -> dict:
    """``{command: [each option's strings]}`` of the real parser."""
    import argparse
    from cloudtrain.commands.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [set(a.option_strings) for a in p._actions if a.option_strings and "-h" not in a.option_strings
                   and "older spelling" not in (a.help or "")   # outputs -o DIR: --dest's old name
                   and a.help != argparse.SUPPRESS]   # hidden: the shell completion's own call
            for name, p in sub.choices.items()}


def test_cli_md_synopses_name_only_real_options_and_every_one():
    real, shown = options(), synopses()
    assert {"submit", "list", "doctor", "resources"} <= set(shown)
    problems = []
    for command, lines in sorted(shown.items()):
        assert command in real, f"cli.md shows `cloudtrain {command}`, which is no command"
        known = set().union(*real[command])
        for flags in lines:
            problems += [f"{command}: {flag} is shown, but is no option of it" for flag in sorted(flags - known)]
        every = set().union(*lines)
        problems += [f"{command}: {' / '.join(sorted(opt))} is shown in no synopsis line of cli.md"
                     for opt in real[command] if not opt & every]
    assert not problems, "\n".join(problems)
