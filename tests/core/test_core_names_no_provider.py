"""Core knows no platform (issue 38 item 3): what a platform is (the registries it pulls from, the
error codes that mean capacity, where its credentials come from, ...) is its provider class's,
in its plugin (docs/plugins.md, "The provider class"), so that a new provider is its folder, its
entry point, its extra and its docs page.  This test fails when core's code names a built-in
provider or plugin outside the small allow-list below, each entry with why it stays.

The names are the built-in providers and plugins as the ``cloudtrain`` distribution's entry
points register them (a provider added there is covered without editing this file), matched as
words, case-sensitively (``-p sagemaker``, ``providers.sagemaker``, ``"sagemaker"`` as a key).
What is read is core's code, with ``ast``: every string literal that is not a docstring, and the
names of functions and classes; comments and docstrings may use a platform as an example.
``cloudtrain.launch`` is left out: the node-side launcher ships to nodes and has its own rules
(docs/launcher.md).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

CORE = Path(__file__).resolve().parents[2] / "core" / "cloudtrain"
LEFT_OUT = ("launch",)

# (module under core/cloudtrain, name) -> why core may say it.
ALLOWED: Dict[Tuple[str, str], str] = {
    # the default provider: design.md ("`-p` defaults to `local`"), a constant of its own
    ("input/config.py", "local"): "DEFAULT_PROVIDER: design.md fixes `-p` defaults to `local`",
    # examples in messages and help: a name the user can type, nothing the code acts on
    ("api.py", "local"): "the example in a message: cloudtrain.render('job.yaml', provider='local'), the default",
    ("api.py", "sagemaker"): "the failover example in a message: provider='sagemaker,azure'",
    ("api.py", "azure"): "the failover example in a message: provider='sagemaker,azure'",
    ("catalogs/resources.py", "ec2"): "the example in a message: cloudtrain catalog refresh -p ec2",
    ("commands/configcmd.py", "sagemaker"): "the examples in messages: cloudtrain config set -p sagemaker region=...",
    ("commands/configcmd.py", "azure"): "the failover example in a message: providers=sagemaker,azure",
    ("input/config.py", "eks"): "the example in a message: profiles: {prod: {provider: eks}}",
    ("input/config.py", "sagemaker"): "the example in a message: providers: {sagemaker: {region: us-east-1}}",
    ("providers/provider.py", "local"): "the example handle in a message: local://digits-ddp-1a2b3c",
    ("commands/initcmd.py", "sagemaker"): "an example in the starter job file's comments (-p sagemaker)",
    ("commands/initcmd.py", "docker"): "an example in the starter job file's comments (image: for docker)",
    # --help text: built before any plugin is loaded (the CLI's cold start, issue 38 item 2)
    ("commands/cli.py", "local"): "--help text: -p's default (design.md) and --emulate's providers",
    ("commands/cli.py", "docker"): "--help text: the providers --emulate is for",
    ("commands/cli.py", "tione"): "--help text: an example of --emulate PLATFORM",
    ("commands/prune.py", "local"): "--help text: the run directories prune removes (local/docker)",
    ("commands/prune.py", "docker"): "--help text: the run directories prune removes (local/docker)",
    # the word, not the provider
    ("commands/completion.py", "local"): "bash's `local` builtin in the completion script",
    ("orchestrate/ledger.py", "local"): "the ledger's column `local`: the job's state is in this machine's store",
    ("runtime/store.py", "local"): "the ledger view's column `local` (SQL): the job's state is in this store",
    ("transfer/storage.py", "local"): "local_path(): a path on this machine",
    ("providers/images.py", "docker"): "Docker Hub, the registry (docker.io, is_docker_hub), not the docker provider",
    # safety that must hold whatever plugins are installed
    ("spec/credentials.py", "aws"): "the fix for a pasted AWS key (`aws configure`): recognised even without the "
                                    "aws plugin, so the key is refused, not sent (docs/security.md)",
    # another helper's file this round
    ("spec/job.py", "local"): "the storage fields' descriptions (docs/job-file.md is generated from them): "
                              "'a local path'; spec/job.py is being reworked by the models' helper this round",
    ("spec/job.py", "docker"): "the checkpoint field's description ('for local and docker'), as above",
}


def builtin_names() -> Set[str]:
    """The built-in providers and the plugins' entry-point names (= their extras)."""
    from cloudtrain.extend import registry
    names = set(registry.builtin_providers()) | {name for name, _ in registry.own_entry_points()}
    assert {"local", "docker", "sagemaker"} <= names, names  # the distribution's entry points were read
    return names


def pattern(names: Set[str]) -> "re.Pattern[str]":
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])({alternatives})(?![\w-])")  # a word: not in cloudtrain_aws, docs.aws


def docstrings(tree: ast.AST) -> Set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def named(source: str, names: "re.Pattern[str]") -> Iterator[Tuple[int, str, str]]:
    """(line, name, where) of every built-in name in ``source``'s code."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for m in names.finditer(node.value):
                yield node.lineno, m.group(1), repr(node.value[:80])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for m in names.finditer(node.name.replace("_", " ").lower()):
                yield node.lineno, m.group(1), f"def {node.name}"


def found_in_core() -> Dict[Tuple[str, str], List[str]]:
    names = pattern(builtin_names())
    found: Dict[Tuple[str, str], List[str]] = {}
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE).as_posix()
        if rel.split("/")[0] in LEFT_OUT:
            continue
        for line, name, where in named(path.read_text(encoding="utf-8"), names):
            found.setdefault((rel, name), []).append(f"{rel}:{line}: {where}")
    return found


def test_core_names_no_built_in_provider_outside_the_allow_list():
    unexpected = [hit for key, hits in sorted(found_in_core().items()) if key not in ALLOWED for hit in hits]
    assert not unexpected, ("core names a built-in provider; move the fact into the provider's plugin (an "
                            "attribute or method of its class, docs/plugins.md), or, if it is no fact, say why "
                            "in ALLOWED:\n" + "\n".join(unexpected))


def test_every_allowed_name_is_still_there():
    gone = sorted(set(ALLOWED) - set(found_in_core()))
    assert not gone, f"no longer in core: remove from ALLOWED: {gone}"


def test_the_check_sees_a_platform_fact():
    names = pattern({"sagemaker", "local", "aws", "modelarts-lite"})
    code = ('"""Docstring: sagemaker is fine here."""\n'
            'CAPACITY = {"sagemaker": frozenset({"ResourceLimitExceeded"})}  # a comment: sagemaker\n'
            'def aws_credentials():\n'
            '    return "~/.aws/credentials" if name == "modelarts-lite" else "cloudtrain_aws"\n')
    assert sorted((line, name) for line, name, _ in named(code, names)) == [(2, "sagemaker"), (3, "aws"),
                                                                      (4, "modelarts-lite")]
