"""The ``cloudtrain`` command line.  argparse only: ``--help`` imports no SDK and no pydantic."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from queue import Empty, Queue
from typing import TYPE_CHECKING, Any, List, Optional

from .. import __version__
from ..spec.errors import CloudtrainError
from ..launch.exitcodes import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_JOB_FAILED

if TYPE_CHECKING:  # the CLI imports pydantic (through the provider base) only when a command needs it
    from ..providers.provider import JobStatus

PROVIDER_HELP = ("provider name (default: the config's `provider`, $CLOUDTRAIN_PROVIDER, else local); "
                 "cloudtrain providers lists them")
PROFILE_HELP = "settings profile of the config files (default: $CLOUDTRAIN_PROFILE); cloudtrain config show lists them"


def _profile_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", metavar="NAME", help=PROFILE_HELP)


def _job_args(p: argparse.ArgumentParser, emulate: bool = True) -> None:
    p.add_argument("-p", "--provider", help=PROVIDER_HELP)
    _profile_arg(p)
    p.add_argument("job", nargs="?", help="path to job.yaml (or none with -j/--script)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field, e.g. --set distribution.nodes=4 (repeatable)")
    p.add_argument("-j", metavar="NODESxPROCS", help="a job without a file (TorchX's -j): e.g. -j 2x4 --script "
                   "train.py -- --lr 0.1 runs python train.py --lr 0.1 as ddp, 2 nodes x 4 processes, code: .")
    p.add_argument("--script", metavar="FILE", help="with -j: the script every process runs (its arguments after --)")
    if emulate:
        p.add_argument("--emulate", metavar="PLATFORM",
                       help="local/docker: inject PLATFORM's node environment (e.g. tione)")


def _render_output_args(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("-o", "--output", choices=("yaml", "json"), default=None,
                   help=prefix + "every artifact in full, as YAML or as a JSON envelope (default: YAML to read: the "
                        "platform's request first, the files shipped to the nodes as size and sha256)")
    p.add_argument("--full", action="store_true", help=prefix + "the files shipped to the nodes in full too "
                   "(as -o yaml)")


class _OneCommand:
    """The subparsers action of a parser for one command (``only``): the other commands' parsers
    are neither built nor their modules imported (a start-up cost of every command, issue 38)."""

    def __init__(self, sub, only: str) -> None:
        self.sub, self.only = sub, only

    def add_parser(self, name: str, **kwargs):
        return self.sub.add_parser(name, **kwargs) if name == self.only else _Skipped()


class _Skipped:
    """A command's parser that is not built: every call does nothing."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, a parser that knows that one command (it parses
    and says errors and ``--help`` of that command the same)."""
    parser = argparse.ArgumentParser(
        prog="cloudtrain",
        description="Run one provider-neutral distributed training job on any platform.")
    parser.add_argument("--version", action="version", version=f"cloudtrain {__version__}")
    commands = parser.add_subparsers(dest="cmd", metavar="COMMAND")
    sub: Any = commands if only is None else _OneCommand(commands, only)

    p = sub.add_parser("submit", help="render and submit a job, then follow it (unless --detach)")
    _job_args(p)
    p.add_argument("--detach", action="store_true", help="print the handle and return at once")
    p.add_argument("--dry-run", action="store_true", help="print the rendered request; send nothing")
    _render_output_args(p, "--dry-run: ")

    p = sub.add_parser("render", help="print the exact platform request (pure, offline)")
    _job_args(p)
    _render_output_args(p)

    p = sub.add_parser("validate", help="every check submit makes before it sends anything; all problems at once")
    _job_args(p)

    p = sub.add_parser("stage", help="upload the job's code where the provider's nodes read it; send no job")
    _job_args(p, emulate=False)

    p = sub.add_parser("config", help="the settings files: merged settings and their sources, path, set")
    p.add_argument("action", nargs="?", choices=("show", "path", "set"), default="show",
                   help="show (default): a provider's merged settings and where each came from; path: the user "
                        "config's path; set KEY=VALUE ...: write settings to the user config")
    p.add_argument("items", nargs="*", metavar="JOB.yaml | KEY=VALUE",
                   help="show: a job file whose providers.<name> and --set count too; set: KEY=VALUE, an option of "
                        "-p's provider, or provider=NAME (the default provider)")
    p.add_argument("-p", "--provider", help=PROVIDER_HELP)
    _profile_arg(p)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="show: a job field override, as submit takes it")
    p.add_argument("--project", action="store_true", help="set: write the project file (.cloudtrain.yaml) "
                   "found from the current directory (or a new one here) instead of the user config")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")

    for name, text in (("status", "show a job's state"), ("cancel", "cancel a job (idempotent)"),
                       ("wait", "wait for a job to end; exit code follows its outcome")):
        p = sub.add_parser(name, help=text)
        p.add_argument("handle", help="PROVIDER://ID")
        _profile_arg(p)
        if name != "cancel":
            p.add_argument("-o", "--output", choices=("text", "json"), default="text")
        if name == "wait":
            p.add_argument("--timeout", type=float, help="give up after this many seconds (exit 1)")

    p = sub.add_parser("outputs", help="download a job's output (what its nodes wrote to CLOUDTRAIN_OUTPUT_DIR)")
    p.add_argument("handle", help="PROVIDER://ID")
    p.add_argument("--dest", metavar="DIR", help="where to put the files (default: ./outputs/<id>)")
    p.add_argument("-o", "--output", metavar="DIR", help="the older spelling of --dest")
    _profile_arg(p)

    p = sub.add_parser("logs", help="print a job's logs")
    p.add_argument("handle", help="PROVIDER://ID")
    p.add_argument("-f", "--follow", action="store_true", help="keep following until the job ends")
    _profile_arg(p)
    p.add_argument("--check-rdma", action="store_true",
                   help="read NCCL's log lines and say whether RDMA was used (exit 0 yes, 1 no or unknown)")
    from .logscmd import add_arguments as _log_selectors
    _log_selectors(p)

    _list_args(sub.add_parser("list", help="every job submitted from here, on every provider (the ledger)"))

    p = sub.add_parser("providers", help="installed plugins, their providers, whether each SDK is present")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")

    p = sub.add_parser("resources", help="instance types that match, across installed providers (their catalogs)")
    p.add_argument("--accelerator", help="a neutral accelerator name, e.g. A100, H100, L4, Ascend-910B")
    p.add_argument("--gpus", type=int, help="accelerators per instance")
    p.add_argument("-p", "--provider", metavar="P[,P...]", help="only these providers' catalogs")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--refresh", action="store_true", help="rebuild -p's catalog from the platform's API (its SDK)")
    p.add_argument("--out", help="--refresh: directory to write the catalog to "
                                 "(default: $CLOUDTRAIN_HOME/catalogs, read first)")
    _price_options(p)
    _catalog_parser(sub)

    sub.add_parser("schema", help="print the JSON Schema of job.yaml")

    p = sub.add_parser("ui", help="every job on every provider in one web page, on 127.0.0.1 (token in the URL)")
    p.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")
    sub.add_parser("launch", help="inside a node: resolve the topology and exec the launcher",
                   add_help=False)
    _add_own_module_commands(sub)
    return parser


# Commands that live in a module of their own: ``add_parser(sub)`` and ``run(args)`` each.
OWN_MODULE_COMMANDS = {"doctor": "doctor", "completion": "completion", "init": "initcmd", "prune": "prune",
                       "controller": "controllercmd", "exec": "execcmd", "stacks": "stackscmd"}


def _add_own_module_commands(sub) -> None:
    import importlib
    only = sub.only if isinstance(sub, _OneCommand) else None
    for name, module in OWN_MODULE_COMMANDS.items():
        if only in (None, name):
            importlib.import_module(f"{__package__}.{module}").add_parser(sub)


def _own_module_command(name: str):
    def run(args) -> int:
        import importlib
        return importlib.import_module(f"{__package__}.{OWN_MODULE_COMMANDS[name]}").run(args)
    return run


def _read_job(args, overrides: list, provider: str, settings):
    """The job file ``args.job``, or the one-line job of ``-j``/``--script`` (input/oneline.py)."""
    from ..spec.errors import BadInput
    script_args = getattr(args, "script_args", None)
    if args.j is None and args.script is None:
        if script_args is not None:
            raise BadInput("the words after -- are a script's arguments: give -j NODESxPROCS --script FILE before --")
        if args.job is None:
            raise BadInput(f"{args.cmd} needs a job file (cloudtrain {args.cmd} job.yaml), or a job without one: "
                           f"cloudtrain {args.cmd} -j 2x4 --script train.py")
        from ..input.loading import load_job
        return load_job(args.job, overrides, provider=provider, settings=settings)
    if args.job is not None:
        raise BadInput(f"a job file ({args.job}) and -j/--script: give one of them (the script's arguments go "
                       "after --)")
    from ..input import oneline
    return oneline.load(args.j, args.script, script_args or [], overrides, provider=provider, settings=settings)


def _load(args):
    """The job with the settings of its provider (``-p``, else the settings' default)."""
    from ..input.config import Settings
    overrides = list(args.overrides)
    settings = Settings.load(args.job, args.profile)
    provider = args.provider or settings.default_provider()
    if getattr(args, "emulate", None):
        from ..input.loading import emulate_override
        overrides.append(emulate_override(provider, args.emulate))
    return _read_job(args, overrides, provider, settings), provider


def _load_each(args) -> list:
    """``[(job, provider)]`` for each failover candidate, in order: ``-p a,b,c``, else the
    profile's ``providers: [a, b, c]``, else the one provider ``_load`` would use."""
    from ..input.config import Settings
    from ..orchestrate.failover import candidates
    settings = Settings.load(args.job, args.profile)
    names = candidates(args.provider) or settings.failover() or [settings.default_provider()]
    out = []
    for provider in names:
        overrides = list(args.overrides)
        if getattr(args, "emulate", None):
            from ..input.loading import emulate_override
            overrides.append(emulate_override(provider, args.emulate))
        out.append((_read_job(args, overrides, provider, settings), provider))
    return out


def _print_each(rendered: list, output: Optional[str], full: bool = False) -> None:
    """One candidate as ``_print_rendered``; several: a JSON list, or YAML documents in order.
    Without ``-o`` and ``--full``: the YAML to read (``Rendered.to_text``: shipped files summarized)."""
    if len(rendered) == 1:
        _print_rendered(rendered[0], output, full)
    elif output == "json":
        print(json.dumps([r.envelope() for r in rendered], indent=2, ensure_ascii=False))
    else:
        print("---\n".join(f"# provider: {r.provider}\n{_yaml(r, output, full)}" for r in rendered), end="")


def _yaml(rendered, output: Optional[str], full: bool) -> str:
    return rendered.to_yaml() if output == "yaml" or full else rendered.to_text()


def _print_rendered(rendered, output: Optional[str], full: bool = False) -> None:
    if output == "json":
        print(rendered.to_json())
    else:
        print(_yaml(rendered, output, full), end="")


def cmd_render(args) -> int:
    from ..api import render
    _print_each([render(job, provider) for job, provider in _load_each(args)], args.output, args.full)
    return 0


def cmd_validate(args) -> int:
    """Every candidate in order (failover): the problems of each, the worst exit code."""
    from ..spec.credentials import mask_text
    from ..extend.plugins import get_provider
    worst = 0
    loaded = list(_load_each(args))
    for job, provider in loaded:
        try:
            _estimate(job, provider)
            from ..api import validate
            validate(job, get_provider(provider))
        except CloudtrainError as exc:
            for line in str(exc).splitlines() or [""]:
                print(f"cloudtrain: error: {mask_text(line)}", file=sys.stderr)
            worst = max(worst, exc.exit_code)
            continue
        where = args.job or f"-j {args.j} --script {args.script}"
        print(f"{where}: ok ({provider}: {job.distribution.type}, {job.distribution.nodes} node(s) x "
              f"{job.procs_per_node} process(es))")
    if any(job.max_restarts for job, _ in loaded):  # a recovery may move along -p a,b,c
        from ..orchestrate.checkpoints import problems
        for line in problems([(provider, job) for job, provider in loaded]):
            print(f"cloudtrain: warning: {mask_text(line)}", file=sys.stderr)
    return worst


def cmd_stage(args) -> int:
    from ..api import stage
    job, provider = _load(args)
    for url in stage(job, provider):
        print(url)
    return 0


def cmd_submit(args) -> int:
    # From here on no instant of submit is left to a KeyboardInterrupt: one while the job file
    # is read (pydantic turns it into a SchemaError) stops before anything is sent.
    interrupts = Interrupts()
    watched: list = []  # the failover's job under watch (Interrupts.watching)
    try:
        from ..api import render_with_hooks, submit_first
        from ..extend.plugins import get_provider
        rendered = []
        for job, provider in _load_each(args):
            _estimate(job, provider)
            rendered.append(render_with_hooks(get_provider(provider), job, submit=True))
        if args.dry_run:
            interrupts.restore()
            _print_each(rendered, args.output, args.full)
            return 0
        if interrupts.pending is not None:
            interrupts.restore()
            print("interrupted: nothing was submitted", file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        run = submit_first(rendered, profile=args.profile, on_skip=_moved_on,
                           watching=lambda run: interrupts.watching(run, watched))
    except KeyboardInterrupt:
        interrupts.restore()
        if not watched:  # (only the watch of a failover's job is interrupted: it is armed there)
            raise
        run = watched[-1]
        if args.detach:
            print(run.handle)
            print(f"interrupted: {run.handle} keeps running (--detach); cloudtrain cancel {run.handle} stops it",
                  file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        return cancel_interrupted(run)
    except BaseException:
        interrupts.restore()
        raise
    if args.detach:  # a detached job is never cancelled by this process ending
        interrupts.restore()
        print(run.handle)
        if interrupts.pending:
            print(f"interrupted: {run.handle} keeps running (--detach); cloudtrain cancel {run.handle} stops it",
                  file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        return 0
    print(f"submitted {run.handle}", file=sys.stderr, flush=True)
    return follow(run, interrupts)


def _moved_on(reason: str) -> None:
    print(f"cloudtrain: {reason}; trying the next provider", file=sys.stderr, flush=True)


class Interrupts:
    """SIGINT, SIGTERM and SIGHUP while ``submit`` makes the job are held (``pending``) instead of
    raising half-way through; once the job is followed (``arm``) they raise KeyboardInterrupt,
    and a signal held until then raises at once, so the job is cancelled.  SIGHUP (the terminal
    closed) cancels as Ctrl-C does: a job followed from a terminal is that terminal's; under
    ``nohup`` (SIGHUP ignored) or with ``--detach`` it keeps running (docs/cli.md#submit)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.pending: Optional[int] = None
        self.armed = False
        self.previous = {}
        for sig in self.SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's and a background shell's stay ignored
                self.previous[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        if self.armed:
            self.armed = False  # one at a time: a second Ctrl-C does not cut the cancel short
            raise KeyboardInterrupt
        self.pending = signum

    def arm(self) -> None:
        self.armed = True
        if self.pending is not None:
            self.armed = False
            raise KeyboardInterrupt

    def disarm(self) -> None:
        self.armed = False

    @contextlib.contextmanager
    def watching(self, run, watched: list):
        """Armed while a failover's job is watched before it starts (``api.submit_first``): the
        job is in the ledger already, and an interrupt there is one while it is followed."""
        watched.append(run)
        self.arm()
        try:
            yield
        finally:
            self.disarm()
        watched.remove(run)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def follow(run, interrupts: Optional[Interrupts] = None) -> int:
    """Stream the job's logs and a status line until it ends; Ctrl-C (or SIGTERM, or one held
    since submit began) cancels it, reason ``interrupted`` (exit 130)."""
    try:
        if interrupts is not None:
            interrupts.arm()
        return _follow(run)
    except KeyboardInterrupt:
        if interrupts is not None:
            interrupts.disarm()
        return cancel_interrupted(run)
    finally:
        if interrupts is not None:
            interrupts.restore()


def cancel_interrupted(run) -> int:
    with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) has no stderr left: cancel all the same
        print(f"\ninterrupted: cancelling {run.handle}", file=sys.stderr, flush=True)
    if run.provider.local_state:
        run.provider.cancel(run.id, reason="interrupted")
    else:
        run.cancel()
    return EXIT_INTERRUPTED


def _follow(run) -> int:
    from .progress import StatusLine
    line = StatusLine()
    lines: Queue = Queue()

    def pump():
        try:
            for item in run.logs(follow=True):
                lines.put(item)
        finally:
            lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        status = run.status()
        next_poll = 0.0
        logs_done = False
        while True:
            try:
                item = lines.get(timeout=0.05 if logs_done else 1.0)
                if item is None:
                    logs_done = True
                    next_poll = 0.0  # the log ended with the job: read the final state now
                else:
                    line.log(item)
                    continue
            except Empty:
                pass
            if time.monotonic() >= next_poll:
                status = run.status()
                line.update(status)
                # A supervisor here writes its last log line, then the final state: once the log
                # has ended, look again soon.  Until then the line (a clock in seconds) needs no
                # more than one read a second; clouds keep their own pace.
                soon = logs_done and run.provider.local_state
                next_poll = time.monotonic() + (0.02 if soon else max(run.provider.status_poll, 1.0))
            if status.terminal and (logs_done or not reader.is_alive()):
                break
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):  # (the terminal may be gone: SIGHUP)
            line.close()
        raise
    final = run.status()
    line.update(final)
    line.close()
    return _ended_exit_code(final)


def _ended_exit_code(status: JobStatus) -> int:
    """The exit code for a job's final status (an ended state always has one; a state that has
    none, which no ended job should be in, is a failure rather than exit 0)."""
    code = status.state.exit_code
    return code if code is not None else EXIT_JOB_FAILED


def _print_status(status, output: str) -> None:
    if output == "json":
        print(json.dumps(status.to_dict()))
    else:
        from .progress import describe, describe_restarts
        print("\n".join([describe(status), *describe_restarts(status)]))


def cmd_status(args) -> int:
    from ..api import attach
    from ..runtime.progress import status_fields
    run = attach(args.handle, profile=args.profile)
    found = run.status()
    from ..orchestrate.ledger import cost_so_far
    # a local/docker job's progress, from its log (issue 43), with the cost so far the ledger knows
    progress, line = status_fields(run, found, cost_so_far(found.handle))
    if args.output == "json" and progress is not None:
        print(json.dumps({**found.to_dict(), "progress": progress}))
        return 0
    _print_status(found, args.output)
    if line and args.output != "json":
        print(line)
    return 0


def cmd_wait(args) -> int:
    from ..api import attach
    from .progress import StatusLine
    from .jobprogress import WaitProgress
    run = attach(args.handle, profile=args.profile)
    line = StatusLine()
    shown = WaitProgress(run, line)  # the status line with the job's progress as it changes
    try:
        final = run.wait(timeout=args.timeout, on_status=shown.update if args.output == "text" else None)
    except TimeoutError as exc:
        line.close()
        print(f"cloudtrain: {exc}", file=sys.stderr)
        return EXIT_JOB_FAILED
    line.close()
    if args.output == "json" or line.live:
        _print_status(final, args.output)
    return _ended_exit_code(final)


def cmd_cancel(args) -> int:
    from ..api import cancel
    _print_status(cancel(args.handle, profile=args.profile), "text")
    return 0


def cmd_outputs(args) -> int:
    from ..api import outputs
    from ..transfer.outputs import destination
    dest = str(destination(args.handle, args.dest, args.output))
    files = outputs(args.handle, dest, profile=args.profile)
    print(f"downloaded {len(files)} file{'s' if len(files) != 1 else ''} to {dest}")
    return 0


def cmd_logs(args) -> int:
    from ..api import attach
    if args.check_rdma:
        from .rdma_check import analyse
        from .progress import printable
        report = analyse(attach(args.handle, profile=args.profile).logs(follow=args.follow))
        print(report.summary())
        for line in report.evidence:  # the job's own lines: nothing in them drives the terminal
            print(f"  {printable(line)}")
        return 0 if report.ok else 1
    from . import logscmd  # --node/--rank/--since/--tail, and a failed job's first failure first
    return logscmd.run(args)


def _list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", "--provider", metavar="P[,P...]", help="only these providers' jobs; a cloud provider "
                   "named here is also asked for its jobs (those not submitted from here too)")
    p.add_argument("--state", metavar="S[,S...]", help="only jobs in these states, e.g. RUNNING,FAILED")
    p.add_argument("--since", metavar="WHEN", help="only jobs submitted since: 90m, 12h, 7d, 2w, or a date 2026-11-20")
    p.add_argument("--refresh", action="store_true", help="read every cloud job still running from its platform "
                   "(without it: those last read more than a minute ago)")
    _profile_arg(p)
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


def _names(text: Optional[str]) -> Optional[List[str]]:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def cmd_list(args) -> int:
    """The ledger, read from the store; a platform is asked only for stale rows, with
    ``--refresh``, or for a cloud provider named by ``-p`` (cloudtrain.api.jobs)."""
    from ..orchestrate import ledger
    providers, states = _names(args.provider), _names(args.state)
    if states:
        from ..spec.errors import BadInput
        from ..spec.states import State
        known = [s.value for s in State]
        for s in states:
            if s.upper() not in known:
                raise BadInput(f"--state {s!r}: one of {', '.join(known)}")
    since = ledger.since(args.since) if args.since else None
    found = ledger.entries(since, providers, states)
    # (a job of this machine that says it runs: its supervisor is checked, cloudtrain.api.jobs)
    if args.refresh or providers or any(e.stale() or (e.local and not e.terminal) for e in found):
        from ..api import jobs

        def warn(what, exc):
            print(f"cloudtrain: warning: cannot read {what} from its platform (shown as last read): {exc}",
                  file=sys.stderr)
        found = jobs(since, providers, states, refresh=args.refresh, profile=args.profile,
                     on_error=None if providers else warn)
    from .jobprogress import json_fields, of_entries, with_columns
    progress = of_entries(found)  # PROGRESS and ETA: each local/docker job's log (issue 43)
    if args.output == "json":
        now = time.time()
        print(json.dumps([{**e.to_dict(now), **json_fields(e, progress)} for e in found], indent=2))
        return 0
    _table(with_columns(ledger.table(found), found, progress))
    from ..catalogs.costnote import lines  # why a COST is `-`, and how to get it (under the table)
    sys.stdout.flush()
    for line in lines(found):
        print(line, file=sys.stderr)
    return 0


def cmd_providers(args) -> int:
    from ..extend.plugins import providers
    infos = providers().values()
    data = [{"provider": i.name, "plugin": i.plugin, "extra": i.extra, "sdk_missing": i.sdk_missing(),
             "install": i.cls.install_hint(), "description": i.cls.description} for i in infos]
    if args.output == "json":
        print(json.dumps(data, indent=2))
        return 0
    rows = [("PROVIDER", "PLUGIN", "EXTRA", "SDK")]
    for d in data:
        sdk = "installed" if not d["sdk_missing"] else f"missing: {d['install']}"
        rows.append((d["provider"], d["plugin"], d["extra"], sdk))
    _table(rows)
    return 0


def _price_options(p) -> None:
    p.add_argument("--region", help="rows offered in this region, priced there")
    p.add_argument("--max-price", type=float,
                   help="rows whose on-demand rate per instance-hour is known and at most this")


def _catalog_parser(sub) -> None:
    p = sub.add_parser("catalog",
                       help="the instance catalogs: refresh rebuilds your copy of one (types, regions, prices)")
    p.add_argument("action", choices=("refresh",))
    p.add_argument("-p", "--provider", required=True, help="the provider whose catalog to rebuild")


def cmd_catalog(args) -> int:
    """``cloudtrain catalog refresh -p P``: the user's copy under $CLOUDTRAIN_HOME/catalogs/."""
    from ..catalogs import resources
    from ..catalogs.catalog import user_dir
    from ..input.homedir import private_dir
    for path in resources.refresh(args.provider, str(private_dir(user_dir()))):
        print(path)
    return 0


def _estimate(job, provider: str) -> None:
    """The job's cost estimate on stderr, before the checks (``max_hourly_cost`` among them, in
    ``Provider.validate``) and before anything is sent; a job whose instance does not resolve
    prints none here: validate says why, with its other problems."""
    from ..spec.errors import BadInput
    from ..catalogs.prices import announce
    try:
        announce(job, provider, sys.stderr, check=False)
    except BadInput:
        pass


def cmd_resources(args) -> int:
    from ..catalogs import resources
    names: List[Optional[str]] = [*(_names(args.provider) or [])] or [None]  # -p a,b: as list -p takes it
    if args.refresh:
        for name in names:
            for path in resources.refresh(name, args.out):
                print(path)
        return 0
    found = [row for name in names
             for row in resources.matching(args.accelerator, args.gpus, name, args.region, args.max_price)]
    if args.output == "json":
        print(resources.rows_json(found, args.region))
    elif found:
        _table(resources.rows_table(found, args.region))
    else:
        gone = [row for name in names for row in resources.retired_matches(args.accelerator, args.gpus, name)]
        why = "; retired: " + ", ".join(f"{p} {r.instance_type} ({r.retired})" for p, r in gone) if gone else ""
        print(f"no instance type matches{why}; cloudtrain resources (no options) lists every one", file=sys.stderr)
    return 0


def cmd_config(args) -> int:
    from . import configcmd
    return configcmd.run(args)


def cmd_ui(args) -> int:
    from ..ui import main
    return main(args.port, args.no_browser)


def cmd_schema(args) -> int:
    from .schema import job_schema
    print(json.dumps(job_schema(), indent=2))
    return 0


def _table(rows) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


COMMANDS = {"outputs": cmd_outputs, "submit": cmd_submit, "render": cmd_render, "validate": cmd_validate,
            "status": cmd_status, "wait": cmd_wait, "cancel": cmd_cancel, "logs": cmd_logs, "list": cmd_list,
            "providers": cmd_providers, "resources": cmd_resources, "schema": cmd_schema, "ui": cmd_ui,
            "config": cmd_config, "stage": cmd_stage, "catalog": cmd_catalog}
COMMANDS.update({name: _own_module_command(name) for name in OWN_MODULE_COMMANDS})


def entry() -> None:
    """The ``cloudtrain`` console script: ``main`` then an immediate exit.  A one-shot command
    has nothing to clean up that the OS does not, and interpreter shutdown (module teardown,
    pydantic's caches) costs ~35 ms of every command."""
    code = main()
    shipping = sys.modules.get("cloudtrain.transfer.shipping")
    if shipping is not None:  # the archives packed for this command (no atexit after os._exit)
        shipping.remove_spool()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader gone (BrokenPipeError), a terminal gone (EIO)
        pass
    os._exit(code)


def _print_warnings() -> None:
    """Show every ``CloudtrainWarning`` as one ``cloudtrain: warning: ...`` line on stderr."""
    import warnings
    from ..spec.errors import CloudtrainWarning
    shown = warnings.showwarning
    if getattr(shown, "cloudtrain", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, CloudtrainWarning):
            from ..spec.credentials import mask_text
            from .colour import warn
            print(f"cloudtrain: {warn('warning:', sys.stderr)} {mask_text(str(message))}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)
    show.cloudtrain = True  # type: ignore[attr-defined]  # a mark on the function (mypy does not model those)
    warnings.simplefilter("always", CloudtrainWarning)
    warnings.showwarning = show


def _positionals(words: List[str]) -> List[str]:
    """The words that are no option and no option's value (``-o json``: neither is a handle)."""
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("-o", "--output", "--profile", "--timeout"):
            skip = True
        elif not word.startswith("-"):
            out.append(word)
    return out


def _another_tools_habit(argv: List[str]) -> str:
    """The message for a command line written as SkyPilot's or TorchX's would be, else ``""``:
    ``launch job.yaml`` off a node (``sky launch task.yaml``; cloudtrain's ``launch`` is the launcher
    inside a node: a node's environment has ``CLOUDTRAIN_NUM_NODES`` or ``CLOUDTRAIN_DETECTORS``), and
    ``status`` (or ``logs``, ``wait``, ``cancel``) without a handle (``sky status`` lists the clusters)."""
    if len(argv) >= 2 and argv[0] == "launch" and argv[1].endswith((".yaml", ".yml")) \
            and not ({"CLOUDTRAIN_NUM_NODES", "CLOUDTRAIN_DETECTORS"} & set(os.environ)) \
            and not os.access(argv[1], os.X_OK):
        return (f"'cloudtrain launch' runs inside a node and takes the node's command; did you mean "
                f"`cloudtrain submit {argv[1]}`?")
    if argv and argv[0] in ("status", "logs", "wait", "cancel") and not _positionals(argv[1:]) \
            and not {"-h", "--help"} & set(argv[1:]):
        return (f"{argv[0]} needs a job's handle (PROVIDER://ID, as submit printed it); "
                "`cloudtrain list` shows the recent jobs and their handles")
    return ""


def _after_dashes(argv: List[str]):
    """``(argv, the words after ``--``)``, or ``(argv, None)``: for ``exec HANDLE [options] -- CMD``
    they are the node's command, as they are (argparse would match them to no positional once
    HANDLE is read); for a job command they are the arguments of ``--script``
    (``submit -j 2x2 --script train.py -- --lr 0.1``)."""
    if argv and argv[0] in ("exec", "submit", "render", "validate", "stage") and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, None


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    misread = _another_tools_habit(argv)
    if misread:
        print(f"cloudtrain: error: {misread}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if argv and argv[0] == "launch":
        from ..launch.main import main as launch_main
        return launch_main(argv[1:])
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        from ..spec.suggest import command_habit, did_you_mean
        hint = (command_habit(argv[0], argv[1:]) or did_you_mean(argv[0], [*COMMANDS, "launch"])
                or "; cloudtrain --help lists the commands")
        print(f"cloudtrain: error: unknown command {argv[0]!r}{hint}", file=sys.stderr)
        return EXIT_BAD_INPUT
    argv, after = _after_dashes(argv)
    parser = build_parser(only=argv[0] if argv and argv[0] in COMMANDS else None)
    args, extra = parser.parse_known_args(argv)
    if after is not None:
        if args.cmd == "exec":
            args.command = after
        else:
            args.script_args = after
    if extra and (args.cmd != "config" or any(item.startswith("-") for item in extra)):
        parser.parse_args(argv)  # argparse's own error for what it does not know
    if extra:  # `config set -p P KEY=VALUE`: words after an option (argparse takes positionals once)
        args.items += extra
    _print_warnings()
    if not args.cmd:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return COMMANDS[args.cmd](args)
    except CloudtrainError as exc:
        from ..spec.credentials import mask_text
        from .colour import bad
        for line in str(exc).splitlines() or [""]:  # several problems: one line each; no token, no password
            print(f"cloudtrain: {bad('error:', sys.stderr)} {mask_text(line)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (`cloudtrain list | head -1`): as SIGPIPE would
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        from ..runtime.diskspace import full, is_full
        if not is_full(exc):
            raise
        error = full(exc.filename or os.environ.get("CLOUDTRAIN_HOME") or os.getcwd())
        print(f"cloudtrain: error: {error}", file=sys.stderr)
        return error.exit_code
