"""``cloudtrain exec HANDLE [--node N] [-it] -- CMD``: run a command inside a running node, where
the platform has a way in (``Provider.exec_command``: local, docker); where it has none, one line
says so (exit 2).  The command's exit code is this command's."""
from __future__ import annotations

import argparse
import subprocess

SHELL = ["/bin/sh"]  # -it without a command: a shell (every image has one)


def add_parser(sub) -> None:
    p = sub.add_parser("exec", help="run a command inside a running node (-it: a shell)")
    p.add_argument("handle", help="PROVIDER://ID")
    p.add_argument("--node", type=int, default=0, metavar="N", help="the node (default: 0, the first)")
    p.add_argument("-i", "--interactive", action="store_true", help="keep standard input open")
    p.add_argument("-t", "--tty", action="store_true", help="a terminal (-it: an interactive shell)")
    p.add_argument("--profile", metavar="NAME", help="settings profile of the config files")
    p.add_argument("command", nargs="*", help="-- CMD [ARG...]: the command to run in the node")


def run(args: argparse.Namespace) -> int:
    from ..api import attach
    from ..spec.errors import BadInput
    if "://" not in args.handle and args.handle.endswith((".yaml", ".yml")):  # SkyPilot's `sky exec task.yaml`
        raise BadInput(f"exec runs a command inside a running job's node and takes the job's handle "
                       f"(PROVIDER://ID); did you mean `cloudtrain submit {args.handle}`?")
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    interactive = args.interactive and args.tty
    if not command:
        if not interactive:
            raise BadInput("exec needs a command after --, e.g. cloudtrain exec HANDLE -- nvidia-smi "
                           "(or -it for a shell)")
        command = list(SHELL)
    if args.node < 0:
        raise BadInput(f"exec --node {args.node}: a node's number, 0 or more")
    job = attach(args.handle, profile=args.profile)
    plan = job.provider.exec_command(job.id, args.node, command, interactive)
    if plan.run is not None:
        return plan.run()
    try:
        return subprocess.call(plan.argv, env=plan.env, cwd=plan.cwd,
                               stdin=None if args.interactive else subprocess.DEVNULL)
    except FileNotFoundError:
        raise BadInput(f"exec: {command[0]!r} is not found in node {args.node}") from None
