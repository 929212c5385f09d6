"""Shared pieces of the benchmark suite: results, statistics, timed processes, the machine.

Standard library only (the benchmarks themselves import cloudtrain where they need it).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "digits-ddp"
BIN = str(Path(sys.executable).parent)  # the interpreter's own bin dir: cloudtrain, torchrun (no shims)


# -- results -------------------------------------------------------------------------------
@dataclass
class Stats:
    samples: List[float]
    unit: str = "s"

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def fmt(self, value: float) -> str:
        if self.unit == "s":
            return f"{value:.3f} s" if value < 10 else f"{value:.2f} s"
        if self.unit == "ms":
            return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"
        if self.unit == "×":
            return f"{value:.3f}×"
        if self.unit == "steps/s":
            return f"{value:.1f} steps/s"
        return f"{value:g} {self.unit}".strip()

    def median_text(self) -> str:
        return self.fmt(self.median) if self.samples else "—"

    def range_text(self) -> str:
        if not self.samples:
            return "—"
        return f"{self.fmt(self.min)} – {self.fmt(self.max)} (n={self.n})"


@dataclass
class Row:
    """One line of the results table: our command(s), the alternative's, the goal."""

    bench: str                      # benchmark name (registry key)
    what: str                       # short description of this comparison
    commands: List[str]             # the exact command(s) measured
    value: Optional[Stats]
    alt_commands: List[str] = field(default_factory=list)
    alt: Optional[Stats] = None
    ratio: Optional[float] = None   # value / alternative (or / reference), median over median
    goal: str = "—"                 # e.g. "≤ 0.5 × TorchX"
    passed: Optional[bool] = None   # None: informational row
    note: str = ""
    failure: str = ""               # why the row could not be measured: FAIL, no ratio

    def __post_init__(self) -> None:
        if self.failure:  # a failed measurement is never a ratio, a PASS or a MISS
            self.ratio, self.passed = None, False
            self.note = join_notes(f"FAILED: {self.failure}", self.note)

    @property
    def result(self) -> str:
        if self.failure:
            return "**FAIL**"
        if self.passed is None:
            return "info"
        return "**PASS**" if self.passed else "**MISS**"


def ratio_of(a: Optional[Stats], b: Optional[Stats]) -> Optional[float]:
    if not a or not b or not a.samples or not b.samples or b.median == 0:
        return None
    return a.median / b.median


def compared(bench: str, what: str, commands: List[str], value: Optional[Stats], alt_commands: List[str],
             alt: Optional[Stats], goal: str = "— (reference)", meets: Optional[Callable[[float], bool]] = None,
             failures: Sequence[str] = (), alt_failures: Sequence[str] = (), alt_name: str = "the alternative",
             note: str = "", name: str = "cloudtrain") -> Row:
    """A row that compares ``value`` with an anchor (TorchX, bare torchrun, boto3 alone): the ratio
    of the medians, and PASS/MISS by ``meets(ratio)`` (informational without it). A run of either
    side that failed, or a side with no samples, makes the row FAIL with the reason instead: a
    ratio against a broken anchor (or over the runs that happened to work) measures nothing."""
    why = [f"{who} failed: {', '.join(reasons)}" for who, reasons in ((alt_name, alt_failures), (name, failures))
           if reasons]
    if not why and not (alt and alt.samples):
        why.append(f"{alt_name}: no measurement")
    if not why and not (value and value.samples):
        why.append(f"{name}: no measurement")
    if why:
        return Row(bench, what, commands, value, alt_commands, alt, goal=goal, note=note, failure="; ".join(why))
    ratio = ratio_of(value, alt)
    return Row(bench, what, commands, value, alt_commands, alt, ratio, goal,
               None if meets is None or ratio is None else meets(ratio), note)


# -- processes -----------------------------------------------------------------------------
def free_port(count: int = 1) -> int:
    """A port p such that p .. p+count-1 are free on 127.0.0.1 right now (the local provider's
    own search, so bare torchrun gets ports the same way cloudtrain does)."""
    from cloudtrain_local.ports import free_port_block
    return free_port_block(count)


SCRUB = re.compile(r"^(CLOUDTRAIN_|PET_|TORCHELASTIC_|TORCHX_|OMPI_|PMIX_)")
SCRUB_NAMES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
               "MASTER_ADDR", "MASTER_PORT", "TF_CONFIG", "RAY_ADDRESS", "PYTHONUNBUFFERED",
               # a user's Python caches bytecode (pip compiles installed packages; an editable
               # checkout like this one writes its .pyc on first use): measure that, not recompiling
               "PYTHONDONTWRITEBYTECODE"}


def base_env(**extra: str) -> Dict[str, str]:
    """The environment every measured command gets: this shell's, less distributed-job variables.
    PATH stays as it is: commands run by their full path (``BIN``), and cloudtrain's local nodes
    find the submitting interpreter's environment without it, as a user's unactivated venv does."""
    env = {k: v for k, v in os.environ.items() if not (SCRUB.match(k) or k in SCRUB_NAMES)}
    env.update(extra)
    return env


def bin_first_on_path(env: Dict[str, str]) -> Dict[str, str]:
    """``env`` with this interpreter's bin dir first on PATH: for TorchX, whose components run
    ``torchrun`` by name (TorchX lives in a venv of its own, which has no torchrun)."""
    return dict(env, PATH=BIN + os.pathsep + env.get("PATH", ""))


@dataclass
class Proc:
    argv: List[str]
    cwd: str
    env: Dict[str, str]


@dataclass
class RunResult:
    wall: float                        # seconds from the first start to the last exit
    codes: List[int]
    lines: List[tuple]                 # (seconds since start, process index, text)
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(c == 0 for c in self.codes)

    def first(self, pattern: str) -> Optional[float]:
        rx = re.compile(pattern)
        for t, _, text in self.lines:
            if rx.search(text):
                return t
        return None

    def find(self, pattern: str) -> Optional[re.Match]:
        rx = re.compile(pattern)
        for _, _, text in self.lines:
            m = rx.search(text)
            if m:
                return m
        return None

    def tail(self, n: int = 15) -> str:
        return "\n".join(text for _, _, text in self.lines[-n:])


def run_procs(procs: Sequence[Proc], timeout: float = 300.0,
              on_timeout: Optional[Callable[["RunResult"], None]] = None) -> RunResult:
    """Start every process at once (stdout+stderr merged, each line timestamped on arrival),
    wait until all have exited; wall time from the first start to the last exit."""
    lines: List[tuple] = []
    lock = threading.Lock()
    t0 = time.perf_counter()
    popens = []
    for p in procs:
        popens.append(subprocess.Popen(p.argv, cwd=p.cwd, env=p.env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True))

    def pump(i: int, stream) -> None:
        for raw in iter(stream.readline, b""):
            t = time.perf_counter() - t0
            with lock:
                lines.append((t, i, raw.decode("utf-8", "replace").rstrip("\n")))

    threads = [threading.Thread(target=pump, args=(i, p.stdout), daemon=True) for i, p in enumerate(popens)]
    ends: List[Optional[float]] = [None] * len(popens)

    def waiter(i: int, p: subprocess.Popen) -> None:  # blocks in waitpid: no polling, exact exit time
        p.wait()
        ends[i] = time.perf_counter()

    waiters = [threading.Thread(target=waiter, args=(i, p), daemon=True) for i, p in enumerate(popens)]
    for t in threads + waiters:
        t.start()
    deadline = t0 + timeout
    for t in waiters:
        t.join(max(0.0, deadline - time.perf_counter()))
    timed_out = any(t.is_alive() for t in waiters)
    if timed_out:
        for p in popens:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # our own process groups only
            except (ProcessLookupError, PermissionError):
                pass
        for t in waiters:
            t.join(10)
    end = max(e if e is not None else time.perf_counter() for e in ends)
    codes = [p.returncode if p.returncode is not None else -9 for p in popens]
    for t in threads:
        t.join(timeout=5)
    result = RunResult(end - t0, [int(c) for c in codes], sorted(lines), timed_out)
    if timed_out and on_timeout:
        on_timeout(result)
    return result


def time_command(argv: List[str], cwd: str, env: Dict[str, str], timeout: float = 120.0) -> tuple:
    """(seconds, returncode, stdout, stderr) of one command run to completion."""
    t0 = time.perf_counter()
    cp = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                        timeout=timeout)
    return time.perf_counter() - t0, cp.returncode, cp.stdout.decode("utf-8", "replace"), \
        cp.stderr.decode("utf-8", "replace")


def show(argv: Sequence[str], cwd: Optional[Path] = None, env: Optional[Dict[str, str]] = None) -> str:
    """A command as a person would type it (tool names without their directory)."""
    words = list(argv)
    if words and os.path.isabs(words[0]):
        words[0] = os.path.basename(words[0])
        if words[0].startswith("python3"):
            words[0] = "python"
    text = " ".join(shlex.quote(w) for w in words)
    if env:
        text = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + text
    if cwd is not None:
        try:
            rel = Path(cwd).resolve().relative_to(REPO)
            if str(rel) != ".":
                text = f"(cd {rel} && {text})"
        except ValueError:
            pass
    return text


def rounds_order(items: Sequence, round_index: int) -> list:
    """Rotate the order every round so no alternative always runs first (interleaving)."""
    k = round_index % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


# -- rounds of side-by-side runs -----------------------------------------------------------
def join_notes(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def store_times(home: Path, *columns: str) -> tuple:
    """The columns of the one job in a fresh ``CLOUDTRAIN_HOME``'s store (Nones if unreadable)."""
    import sqlite3
    try:
        db = sqlite3.connect(str(home / "state.db"))
        try:
            row = db.execute(f"SELECT {', '.join(columns)} FROM jobs").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        row = None
    return tuple(row) if row else (None,) * len(columns)


FAILURES = Path(tempfile.gettempdir()) / "cloudtrain-bench-failures"


def cancel_submitted(result: "RunResult", proc: "Proc") -> None:
    """A `cloudtrain submit` that timed out: its detached supervisor outlives the CLI, so cancel
    the job it printed (local or docker)."""
    m = result.find(r"submitted ((?:local|docker)://\S+)")
    if m:
        subprocess.run([f"{BIN}/cloudtrain", "cancel", m.group(1)], env=proc.env, capture_output=True, timeout=120)


class Rounds:
    """Samples of the variants of a benchmark, run in interleaved rounds (every variant once per
    round, the order rotating), with per-round paired ratios and the failures.  Subclasses run
    one variant (``run_one``) and may order a round (``order``); a variant is a name, or an
    object with a ``name``; samples have ``round`` and the measured attributes."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.samples: Dict[str, list] = {}
        self.failures: Dict[str, List[str]] = {}
        self.round_times: List[float] = []  # seconds per single run
        self.rounds_done = 0

    @staticmethod
    def key(variant) -> str:
        return getattr(variant, "name", variant)

    def run_one(self, variant, record: bool = True, round_index: int = -1):
        raise NotImplementedError  # each benchmark runs its own commands

    def order(self, wanted: list, r: int) -> list:
        return rounds_order(wanted, r)

    def run_rounds(self, wanted: list, min_rounds: int, max_rounds: int, deadline: float) -> None:
        """Rounds until every wanted variant has ``max_rounds`` samples, or ``min_rounds`` when
        one more round would not fit before ``deadline`` (and two spare rounds for failed runs)."""
        r = 0
        while True:
            have = min(len(self.samples.get(self.key(v), [])) for v in wanted)
            if have >= max_rounds or r >= max_rounds + 2:
                break
            estimate = statistics.median(self.round_times) * len(wanted) if self.round_times else 0
            if have >= min_rounds and time.monotonic() + estimate > deadline:
                self.ctx.log(f"  stopping at {have} rounds: the time budget is used up")
                break
            order = self.order(wanted, r)
            self.ctx.log(f"  round {r + 1} ({', '.join(self.key(v) for v in order)})")
            for v in order:
                t = time.monotonic()
                self.run_one(v, round_index=self.rounds_done)
                self.round_times.append(time.monotonic() - t)
            r += 1
            self.rounds_done += 1

    @staticmethod
    def _getter(what) -> Callable:
        return what if callable(what) else (lambda s: getattr(s, what))

    def fail(self, name: str, label: str, result: "RunResult", home: Path) -> None:
        """Record a failed run of ``name``: keep its output and the job's ``CLOUDTRAIN_HOME``
        (models and code copies left out) under ``FAILURES``, outside the scratch directory that
        is removed at the end, and say why."""
        keep = FAILURES / f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
        keep.mkdir(parents=True, exist_ok=True)
        (keep / "output.txt").write_text("\n".join(f"{t:8.3f} [{i}] {x}" for t, i, x in result.lines))
        if home.exists():
            shutil.copytree(home, keep / "cloudtrain-home", ignore=shutil.ignore_patterns("code", "*.pt"))
        why = "timed out" if result.timed_out else f"exit codes {result.codes}"
        self.failures.setdefault(name, []).append(why)
        self.ctx.log(f"    {name}: FAILED ({why}); output and logs kept in {keep}\n" + result.tail(8))

    def stats(self, name: str, what, unit: str = "s") -> Optional[Stats]:
        get = self._getter(what)
        values = [v for v in (get(s) for s in self.samples.get(name, [])) if v is not None]
        return Stats(values, unit) if values else None

    def paired(self, a: str, b: str, what) -> Optional[Stats]:
        """Per-round ratios a/b of runs made back to back (robust to load that drifts)."""
        get = self._getter(what)
        sa = {s.round: get(s) for s in self.samples.get(a, []) if get(s)}
        sb = {s.round: get(s) for s in self.samples.get(b, []) if get(s)}
        ratios = [sa[r] / sb[r] for r in sorted(set(sa) & set(sb))]
        return Stats(ratios, "×") if ratios else None

    def paired_note(self, a: str, b: str, what) -> str:
        p = self.paired(a, b, what)
        return f"per-round ratio of back-to-back runs: median {p.median_text()}, {p.range_text()}" if p else ""

    def compared(self, bench: str, what: str, a: str, b: str, attr, commands: List[str], alt_commands: List[str],
                 goal: str = "— (reported)", meets: Optional[Callable[[float], bool]] = None, unit: str = "s",
                 alt_failures: Sequence[str] = (), note: str = "") -> Row:
        """The row comparing variant ``a`` with the anchor variant ``b`` on ``attr`` (see ``compared``)."""
        return compared(bench, what, commands, self.stats(a, attr, unit), alt_commands, self.stats(b, attr, unit),
                        goal, meets, failures=self.failures.get(a, []),
                        alt_failures=list(alt_failures) + self.failures.get(b, []), alt_name=b,
                        note=join_notes(self.paired_note(a, b, attr), note), name=a)


# -- torchx ---------------------------------------------------------------------------------
# one per tested environment: its .pth points into that environment (see install_torchx)
TORCHX_VENV = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cloudtrain-bench"
               / f"torchx-venv-{hashlib.sha1(sys.prefix.encode()).hexdigest()[:10]}")
PARENT_PTH = "cloudtrain-bench-parent.pth"


@dataclass
class Torchx:
    """TorchX, the suite's anchor for the CLI and launch benchmarks: its executable when
    ``torchx --help`` runs, else why it is missing or broken (its rows then FAIL with that)."""

    exe: Optional[str] = None
    failure: str = ""

    def __bool__(self) -> bool:
        return bool(self.exe) and not self.failure


_torchx: Optional[Torchx] = None


def torch_version(python: str = sys.executable) -> Optional[str]:
    cp = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                        capture_output=True, text=True)
    return cp.stdout.strip() or None


def site_dirs() -> List[str]:
    """This interpreter's site-packages directories, as it sees them (a venv's own, and the
    system's when the venv includes them)."""
    return [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)]


def torchx_works(exe: str) -> str:
    """'' when ``torchx --help`` runs, else why not (its last line of error output)."""
    try:
        cp = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{exe} --help`: {exc}"
    if cp.returncode == 0:
        return ""
    last = [x for x in cp.stderr.splitlines() if x.strip()][-1:] or [f"exit {cp.returncode}"]
    return f"`torchx --help` exits {cp.returncode}: {last[0].strip()[:200]}"


def install_torchx(log: Callable[[str], None]) -> str:
    """Make the suite's TorchX venv; '' on success, else why it failed.

    A plain venv whose ``.pth`` file appends this interpreter's site-packages (after the venv's
    own): torchx and its pins live in the venv, torch, the example's scikit-learn and torchrun's
    modules come from the environment under test. (`--system-site-packages` would not do: made
    from a venv's python, it sees the *base* interpreter's packages, without this venv's torch.)
    pip sees the appended packages as installed, so it installs only what torchx lacks.
    """
    log(f"installing torchx into {TORCHX_VENV} (once): python -m venv; pip install torchx kubernetes")
    shutil.rmtree(TORCHX_VENV, ignore_errors=True)
    cp = subprocess.run([sys.executable, "-m", "venv", str(TORCHX_VENV)], capture_output=True, text=True)
    if cp.returncode != 0:
        return f"python -m venv {TORCHX_VENV} failed: {cp.stderr.strip()[-200:]}"
    python = str(TORCHX_VENV / "bin" / "python")
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    Path(own, PARENT_PTH).write_text("".join(d + "\n" for d in site_dirs()))
    want = torch_version()
    cp = subprocess.run([python, "-m", "pip", "install", "-q", "torchx", "kubernetes"], capture_output=True,
                        text=True)  # kubernetes: the kubernetes scheduler's dry run
    if cp.returncode != 0:
        return f"pip install torchx kubernetes failed: {cp.stderr.strip()[-300:]}"
    got = torch_version(python)
    if got != want:
        return f"torch in the torchx venv is {got}, not this interpreter's {want}"
    return ""


def find_torchx(log: Callable[[str], None], install: bool = True) -> Torchx:
    """TorchX: $BENCH_TORCHX, else a torchx on PATH, else the suite's own venv (made on first
    use when ``install``); checked once per run with ``torchx --help``."""
    global _torchx
    if _torchx is not None:
        return _torchx
    exe = os.environ.get("BENCH_TORCHX") or shutil.which("torchx")
    if exe:
        failure = torchx_works(exe)
    else:
        exe = str(TORCHX_VENV / "bin" / "torchx")
        failure = torchx_works(exe) if os.path.exists(exe) else "torchx is not installed"
        if failure and install:  # missing, or a venv left broken by an earlier install: make it afresh
            failure = install_torchx(log) or torchx_works(exe)
    if failure:
        log(f"torchx: FAILED: {failure}")
    _torchx = Torchx(exe, failure)
    return _torchx


def package_version(name: str, python: str = sys.executable) -> Optional[str]:
    cp = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
                        capture_output=True, text=True)
    return cp.stdout.strip() or None


# -- what the suite needs ------------------------------------------------------------------
# (module the suite imports or runs, cloudtrain's extra that requires it, the requirement when
# that extra's own pin is unknown)
NEEDS = [("torch", "examples", "torch"), ("sklearn", "examples", "scikit-learn"),  # the digits job
         ("boto3", "aws", "boto3"),                     # sagemaker-submit: the SageMaker provider
         ("moto", "test", "moto[server]"), ("flask", "test", "moto[server]"),  # its double
         ("flask_cors", "test", "moto[server]"),
         ("docker", "docker", "docker")]                # docker: the docker provider


def _name(spec: str) -> str:
    m = re.match(r"[A-Za-z0-9._-]+", spec.strip())
    return m.group(0).lower() if m else ""


def declared(requires: Sequence[str], extra: str, default: str) -> str:
    """The requirement of ``extra`` among a distribution's ``Requires-Dist`` lines that names
    ``default``'s distribution (e.g. ``moto[server]>=5``), else ``default``."""
    for line in requires:
        spec, _, marker = line.partition(";")
        m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if m and m.group(1) == extra and _name(spec) == _name(default):
            return spec.strip()
    return default


def missing_requirements() -> List[str]:
    """pip requirements for what the suite needs and this interpreter lacks, as cloudtrain's
    extras pin them (cloudtrain itself first when it is not installed)."""
    import importlib.metadata
    import importlib.util
    extras = sorted({e for _, e, _ in NEEDS if e != "test"})
    try:
        requires, out, covered = importlib.metadata.requires("cloudtrain") or [], [], set()
    except importlib.metadata.PackageNotFoundError:  # this checkout, with the extras it needs
        requires, out, covered = [], [f"--editable={REPO}[{','.join(extras)}]"], set(extras)
    for module, extra, default in NEEDS:
        if extra not in covered and importlib.util.find_spec(module) is None:
            want = declared(requires, extra, default)
            if want not in out:
                out.append(want)
    return out


def install_requirements(log: Callable[[str], None], install: bool = True) -> List[str]:
    """pip-install what ``missing_requirements`` names into this interpreter's environment (or,
    without ``install``, only say what to run); returns what is still missing."""
    import importlib
    missing = missing_requirements()
    if not missing:
        return []
    argv = [sys.executable, "-m", "pip", "install", "-q", *missing]
    line = " ".join(shlex.quote(a) for a in argv)
    if not install:
        log(f"the suite needs {', '.join(missing)}: {line}")
        return missing
    log(f"installing what the suite needs into {sys.prefix}: {line}")
    cp = subprocess.run(argv, capture_output=True, text=True)
    if cp.returncode != 0:
        log(f"pip failed (exit {cp.returncode}): {cp.stderr.strip()[-500:]}")
    importlib.invalidate_caches()
    still = missing_requirements()
    if still:
        log(f"still missing: {', '.join(still)} (the benchmarks that need them will fail)")
    return still


# -- the machine ---------------------------------------------------------------------------
def machine() -> Dict[str, str]:
    info = {"cores": str(os.cpu_count())}
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                info["memory"] = f"{int(line.split()[1]) / 1024 ** 2:.1f} GiB"
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["kernel"] = os.uname().release
    info["python"] = sys.version.split()[0]
    info["torch"] = torch_version() or "?"
    info["cloudtrain"] = package_version("cloudtrain") or "?"
    return info


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def dump_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, default=lambda o: o.__dict__))
