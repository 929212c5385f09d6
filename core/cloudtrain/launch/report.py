"""Progress from the job itself: ``report(step=1200, total_steps=5000, loss=0.31)``.

Standard library only (Python >= 3.8); it ships with the launcher, so ``from cloudtrain.launch
import report`` works on every node whether cloudtrain is installed there or not.

A report becomes one line on the process's standard error (where tracebacks and progress
bars go too: a script's standard output stays its own, e.g. ``train.py > results.txt``)::

    CLOUDTRAIN_PROGRESS {"v":1,"t":1764316800.25,"step":1200,"total_steps":5000,"metrics":{"loss":0.31}}

``v`` is the form's version (1); ``t`` the time of the report (seconds since the epoch);
``step``, ``total_steps``, ``epoch`` and ``total_epochs`` appear when given; ``metrics`` holds
every other keyword whose name matches ``NAME`` and whose value is a number (a value that is
not a finite number is written as ``null``).  A name that looks like a secret (``SECRET_WORDS``,
e.g. ``aws_secret_access_key``, ``token``, ``password``) is dropped and never written.

Cheap on the training loop's thread: ``report`` only keeps the latest values; a daemon thread
writes them, at most one line per ``INTERVAL`` seconds (the latest report wins, none is
written twice).  ``flush()`` writes a pending report at once; it runs at interpreter exit too
(a script that leaves with ``os._exit`` calls it first).  Only the process of global rank 0
writes (``RANK``, else Open MPI's or Slurm's rank variable, unset means 0): a script may call
``report`` on every rank.
"""
import json
import math
import os
import re
import sys
import threading
import time
from collections import deque

PREFIX = "CLOUDTRAIN_PROGRESS "
VERSION = 1
INTERVAL = 1.0  # seconds between two written lines at most (the latest report wins)
MAX_METRICS = 32
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]{0,63}\Z")
# A name with one of these among its words (split at _ . - / and camelCase) is dropped, as is
# one that contains a word of CONTAINS anywhere: a metric never carries a credential out.
SECRET_WORDS = frozenset(("secret", "token", "password", "passwd", "pwd", "passphrase", "key", "apikey",
                          "credential", "credentials", "auth", "cookie", "signature", "sig", "sas",
                          "private", "session"))
SECRET_PARTS = ("secret", "password", "passwd", "credential", "apikey", "api_key", "accesskey", "access_key",
                "private_key", "privatekey")
FIELDS = ("step", "total_steps", "epoch", "total_epochs")
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")

_latest = deque(maxlen=1)  # (time, fields, metrics) of the newest report not yet written
_idle = [True]  # the writer thread waits for a report
_keep = _latest.append
_now = time.time
_wake = threading.Event()
_write_lock = threading.Lock()
_names = {}  # name -> allowed, decided once per name
_writer = []
_enabled = []


def secret_like(name):
    """Whether metric ``name`` looks like it names a secret."""
    lowered = name.lower()
    if any(part in lowered for part in SECRET_PARTS):
        return True
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return any(word in SECRET_WORDS for word in re.split(r"[_.\-/]+", words))


def allowed(name):
    """Whether a metric called ``name`` is written: a short plain name, not a secret's."""
    ok = _names.get(name)
    if ok is None:
        ok = _names[name] = bool(isinstance(name, str) and NAME.match(name)) and not secret_like(name)
    return ok


def _number(value):
    """``value`` as a JSON number (None for NaN and infinities), or ``...`` when it is not one."""
    if isinstance(value, bool):
        return ...
    if not isinstance(value, (int, float)):
        if type(value).__module__ != "numpy":  # numpy scalars; never float() an arbitrary object
            return ...
        try:
            value = float(value)
        except (TypeError, ValueError):
            return ...
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def line(at, fields, metrics):
    """The report's line (without its newline): ``PREFIX`` and compact JSON."""
    record = {"v": VERSION, "t": round(at, 3)}
    for name, value in zip(FIELDS, fields):
        value = _number(value) if value is not None else None
        if value is not None and value is not ...:
            record[name] = value
    kept = {}
    for name, value in metrics.items():
        if len(kept) >= MAX_METRICS:
            break
        if allowed(name):
            value = _number(value)
            if value is not ...:
                kept[name] = value
    if kept:
        record["metrics"] = kept
    return PREFIX + json.dumps(record, separators=(",", ":"), allow_nan=False)


def _rank_zero():
    for variable in RANK_VARIABLES:
        value = os.environ.get(variable)
        if value is not None:
            return value.strip() in ("0", "")
    return True


def report(step=None, total_steps=None, epoch=None, total_epochs=None, **metrics):
    """Record the job's progress (see the module's docstring); returns at once."""
    if not _enabled:
        _enabled.append(_rank_zero())
    if not _enabled[0]:
        return
    _keep((_now(), (step, total_steps, epoch, total_epochs), metrics))
    if _idle[0]:
        _idle[0] = False
        if not _writer:
            _start()
        _wake.set()


def _write_one():
    """Write the pending report, if any; whether there was one."""
    try:
        at, fields, metrics = _latest.pop()
    except IndexError:
        return False
    try:
        text = line(at, fields, metrics) + "\n"
        with _write_lock:
            sys.stderr.write(text)
            sys.stderr.flush()
    except Exception:  # a closed or replaced stream: progress must never break training
        pass
    return True


def flush():
    """Write the pending report now (at exit, before ``os._exit``)."""
    _write_one()


def _run():
    while True:
        _wake.wait()
        _wake.clear()
        while True:
            if not _write_one():
                _idle[0] = True
                if _latest and _idle[0]:  # a report came between the pop and the flag
                    _idle[0] = False
                    continue
                break
            time.sleep(INTERVAL)


def _start():
    import atexit
    thread = threading.Thread(target=_run, name="cloudtrain-report", daemon=True)
    _writer.append(thread)
    atexit.register(flush)
    thread.start()
