"""``cloudtrain completion bash|zsh|fish``: a shell completion script, made from the command
line's own parser (every command, its options, the choices an option takes) and the installed
providers' names, so it never falls behind the commands.

    eval "$(cloudtrain completion bash)"                          # ~/.bashrc
    eval "$(cloudtrain completion zsh)"                           # ~/.zshrc
    cloudtrain completion fish > ~/.config/fish/completions/cloudtrain.fish
"""
from __future__ import annotations

import argparse
import shlex
from typing import Dict, List, Tuple

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub) -> None:
    p = sub.add_parser("completion", help="print a shell completion script: eval \"$(cloudtrain completion bash)\"")
    p.add_argument("shell", nargs="?", choices=SHELLS)
    # what the scripts run at TAB: the handles of the recent jobs, one a line (not for people)
    p.add_argument("--handles", action="store_true", help=argparse.SUPPRESS)


class Command:
    def __init__(self, name: str, help: str, parser: argparse.ArgumentParser):
        self.name, self.help = name, help or ""
        self.options: List[Tuple[List[str], List[str], bool, str]] = []  # (flags, choices, takes a value, help)
        self.positional_choices: List[str] = []
        self.takes_handle = False  # a job's handle, PROVIDER://ID (completed from the ledger)
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:
                continue
            if action.dest == "handle" and not action.option_strings:
                self.takes_handle = True
            elif isinstance(action, argparse._HelpAction):
                self.options.append((list(action.option_strings), [], False, "show this help"))
            elif action.option_strings:
                takes = action.nargs != 0
                self.options.append((list(action.option_strings), [str(c) for c in action.choices or ()], takes,
                                     action.help or ""))
            elif action.choices:
                self.positional_choices += [str(c) for c in action.choices]

    def flags(self) -> List[str]:
        return [f for flags, _, _, _ in self.options for f in flags]


def commands() -> List[Command]:
    from .cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps: Dict[str, str] = {c.dest: c.help or "" for c in sub._choices_actions}
    return [Command(name, helps.get(name, ""), p) for name, p in sub.choices.items() if name != "launch"]


def provider_names() -> List[str]:
    try:
        from ..extend.plugins import providers
        return sorted(providers())
    except Exception:  # a broken plugin must not stop completion
        return []


def _words(items) -> str:
    return shlex.quote(" ".join(items))


# the newest jobs' handles offered at TAB (the ledger keeps every one; a long list helps nobody)
HANDLES_SHOWN = 200


def handles() -> List[str]:
    """The handles of the ledger's newest jobs (this machine's and those submitted from here),
    newest first; none before cloudtrain kept any state (no state store is made for it)."""
    from ..input.homedir import home
    if not (home() / "state.db").exists():
        return []
    from ..orchestrate.ledger import entries
    return [e.handle for e in entries(limit=HANDLES_SHOWN)]


def state_names() -> List[str]:
    from ..spec.states import State
    return [s.value for s in State]


# bash: complete "$1" (the words) for the word being completed as a comma-separated list
# (`list --state RUNNING,FA<TAB>`, `-p local,dock<TAB>`): only its last item, the rest kept
BASH_LIST = [
    "_cloudtrain_list() {",
    "    local done=\"${cur%\"${cur##*,}\"}\"",
    "    mapfile -t COMPREPLY < <(compgen -W \"$1\" -P \"$done\" -- \"${cur##*,}\")",
    "}",
]

# bash: a job's handle, PROVIDER://ID.  Bash splits words at ':' (COMP_WORDBREAKS), so the word is
# read from the line itself and the reply given from after its last ':', the part bash replaces.
BASH_HANDLES = [
    "_cloudtrain_handles() {",
    "    local word=\"$cur\" colon",
    "    if [ -n \"${COMP_LINE:-}\" ]; then word=\"${COMP_LINE:0:COMP_POINT}\"; word=\"${word##*[[:space:]]}\"; fi",
    "    mapfile -t COMPREPLY < <(compgen -W \"$(cloudtrain completion --handles 2>/dev/null)\" -- \"$word\")",
    "    if [[ \"$word\" == *:* && \"${COMP_WORDBREAKS:-:}\" == *:* ]]; then",
    "        colon=\"${word%\"${word##*:}\"}\"",
    "        COMPREPLY=(\"${COMPREPLY[@]#\"$colon\"}\")",
    "    fi",
    "}",
]


def bash() -> str:
    cmds = commands()
    names = provider_names()
    lines = [
        "# cloudtrain completion for bash (and zsh through bashcompinit): eval \"$(cloudtrain completion bash)\"",
        *BASH_LIST, *BASH_HANDLES,
        "_cloudtrain_complete() {",
        "    local cur prev cmd i",
        "    cur=\"${COMP_WORDS[COMP_CWORD]}\"",
        "    prev=\"\"",
        "    if [ \"$COMP_CWORD\" -gt 0 ]; then prev=\"${COMP_WORDS[COMP_CWORD-1]}\"; fi",
        "    cmd=\"\"",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        case \"${COMP_WORDS[i]}\" in -*) ;; *) cmd=\"${COMP_WORDS[i]}\"; break ;; esac",
        "    done",
        "    COMPREPLY=()",
        "    if [ -z \"$cmd\" ]; then",
        f"        mapfile -t COMPREPLY < <(compgen -W {_words(c.name for c in cmds)} -- \"$cur\")",
        "        return 0",
        "    fi",
        "    case \"$prev\" in",
        f"        -p|--provider) _cloudtrain_list {_words(names)}; return 0 ;;",
        f"        --emulate) mapfile -t COMPREPLY < <(compgen -W {_words(names)} -- \"$cur\"); return 0 ;;",
        f"        --state) _cloudtrain_list {_words(state_names())}; return 0 ;;",
        "    esac",
        "    case \"$cmd\" in",
    ]
    for c in cmds:
        lines.append(f"        {c.name})")
        valued = [(flags, choices) for flags, choices, takes, _ in c.options if takes and choices]
        if valued:
            lines.append("            case \"$prev\" in")
            for flags, choices in valued:
                lines.append(f"                {'|'.join(flags)}) "
                             f"mapfile -t COMPREPLY < <(compgen -W {_words(choices)} -- \"$cur\"); return 0 ;;")
            lines.append("            esac")
        lines.append("            if [[ \"$cur\" == -* ]]; then")
        lines.append(f"                mapfile -t COMPREPLY < <(compgen -W {_words(c.flags())} -- \"$cur\")")
        if c.positional_choices:
            lines.append("            else")
            words = _words(c.positional_choices)
            lines.append(f"                mapfile -t COMPREPLY < <(compgen -W {words} -- \"$cur\")")
        elif c.takes_handle:
            lines.append("            else")
            lines.append("                _cloudtrain_handles")
        else:
            lines.append("            else")
            lines.append("                mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")")
        lines.append("            fi")
        lines.append("            ;;")
    lines += ["    esac", "    return 0", "}",
              "complete -o filenames -o bashdefault -F _cloudtrain_complete cloudtrain", ""]
    return "\n".join(lines)


def zsh() -> str:
    """zsh runs the bash function through its bashcompinit layer (zsh's own documented bridge)."""
    return "\n".join(["# cloudtrain completion for zsh: eval \"$(cloudtrain completion zsh)\"",
                      "autoload -U +X compinit && compinit",
                      "autoload -U +X bashcompinit && bashcompinit",
                      bash()])


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish() -> str:
    cmds = commands()
    names = " ".join(provider_names())
    out = ["# cloudtrain completion for fish: cloudtrain completion fish > ~/.config/fish/completions/cloudtrain.fish",
           "complete -c cloudtrain -f"]
    all_names = " ".join(c.name for c in cmds)
    for c in cmds:
        out.append(f"complete -c cloudtrain -n 'not __fish_seen_subcommand_from {all_names}' -a {c.name} "
                   f"-d {_fish_quote(c.help.split(';')[0][:70])}")
    for c in cmds:
        cond = f"-n '__fish_seen_subcommand_from {c.name}'"
        for flags, choices, takes, help in c.options:
            spec = " ".join(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}" for f in flags)
            values = ""
            if takes and ("--provider" in flags or "--emulate" in flags):
                values = f" -x -a {_fish_quote(names)}"
            elif takes and "--state" in flags:
                values = f" -x -a {_fish_quote(' '.join(state_names()))}"
            elif takes and choices:
                values = f" -x -a {_fish_quote(' '.join(choices))}"
            elif takes:
                values = " -r"
            out.append(f"complete -c cloudtrain {cond} {spec}{values} -d {_fish_quote(help.split(';')[0][:70])}")
        if c.positional_choices:
            out.append(f"complete -c cloudtrain {cond} -a {_fish_quote(' '.join(c.positional_choices))}")
        elif c.takes_handle:
            out.append(f"complete -c cloudtrain {cond} -a '(cloudtrain completion --handles 2>/dev/null)'")
        else:
            out.append(f"complete -c cloudtrain {cond} -F")
    return "\n".join(out) + "\n"


def run(args) -> int:
    if args.handles:
        for handle in handles():
            print(handle)
        return 0
    if args.shell is None:
        from ..spec.errors import BadInput
        raise BadInput(f"completion needs a shell: one of {', '.join(SHELLS)} "
                       "(eval \"$(cloudtrain completion bash)\" in ~/.bashrc)")
    print({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](), end="")
    return 0
