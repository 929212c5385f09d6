"""A string ``command`` is split into words as a POSIX shell would split it (``shlex.split``)
but no shell runs it. Where a shell would do more than split (run a second line, expand
``$VAR``, pipe, redirect, chain with ``&&`` or ``;``, glob, expand ``~``, drop a ``# comment``),
the words would differ from what the user meant, and the job would run wrong without a word
(issue 44: SkyPilot's ``run: |`` is bash). ``shell_syntax`` finds such a construct so the job
file is refused at its line, with the two forms that say what to run.
"""
from __future__ import annotations

import re
from typing import Optional

# Azure ML's command bindings, ``${{inputs.data}}`` / ``${{outputs.model}}``: the platform replaces
# them in the command before anything runs (azure-ai-ml, ParameterizedCommandSchema.command).
_AZURE_BINDING = re.compile(r"\$\{\{\s*(?:inputs|outputs)\.[A-Za-z0-9_]+\s*\}\}")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_BRACES = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")

# what a character does in a shell, outside quotes
_OPERATORS = {"|": "a pipe (|)", "&": "an && or a background &", ";": "a ';'", "<": "a redirection (<)",
              ">": "a redirection (>)", "(": "a subshell or group ( )", ")": "a subshell or group ( )",
              "`": "a command substitution (`...`)"}
_GLOBS = "*?["


def shell_syntax(command: str) -> Optional[str]:
    """What in ``command`` a shell would read differently from ``shlex.split``, or None."""
    text = _AZURE_BINDING.sub("x", command.strip())
    if "\n" in text or "\r" in text:
        return "several lines"
    words: list = []  # each word's characters outside quotes (the ones a shell interprets)
    bare, word_started, quote, escaped = "", False, "", False
    for ch in text:
        if escaped:
            escaped = False
            word_started = True
            continue
        if quote == "'":
            if ch == "'":
                quote = ""
            continue
        if quote == '"':
            if ch == "\\":
                escaped = True
            elif ch == '"':
                quote = ""
            elif ch == "$":
                return "a $ (variable or command substitution)"
            elif ch == "`":
                return _OPERATORS["`"]
            continue
        if ch == "\\":
            escaped = True
        elif ch in "'\"":
            quote, word_started = ch, True
        elif ch in " \t":
            if word_started:
                words.append(bare)
            bare, word_started = "", False
        elif ch == "$":
            return "a $ (variable or command substitution)"
        elif ch in _OPERATORS:
            return _OPERATORS[ch]
        elif ch == "#" and not word_started:
            return "a # comment"
        elif ch == "~" and not word_started:
            return "a ~ (the home directory)"
        else:
            bare += ch
            word_started = True
    if word_started:
        words.append(bare)
    if words and _ASSIGNMENT.match(words[0]):
        return "a variable assignment before the command (put it in env:)"
    for bare in words:
        if any(g in bare for g in _GLOBS):
            return "a glob (* ? [...])"
        if _BRACES.search(bare):
            return "a brace expansion ({a,b})"
    return None


def refusal(command: str, construct: str) -> str:
    """The message for a string ``command`` with shell syntax: what was found and the two forms
    that say exactly what to run."""
    import json
    return (f"has {construct}, which a shell would interpret, but a string command is only split into words "
            f"and never run by a shell; write the words as a list, e.g. command: [python, train.py, --lr, '0.1'], "
            f"or ask for a shell explicitly: command: {json.dumps(['bash', '-c', command.strip()])}")
