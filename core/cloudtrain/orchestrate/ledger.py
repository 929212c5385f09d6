"""The ledger: every job submitted from this machine, on every provider, in the state store.

Each submission is one ``Entry``: its handle and provider (for a failover, the provider that ran
it; ``tried`` says which refused it first and why), the settings profile, the instance type,
nodes, spot, the hourly rate per node and its currency (from the catalog row of the chosen
instance type; None while the catalog has no price), when it was submitted, started and ended,
its state, restarts, and the platform a local or Docker job emulated.  Local and Docker jobs
read their state from the store as their supervisors write it; a cloud job's row is as it was
last read from the platform (``refresh``; ``cloudtrain list`` reads the stale ones again).

Read it with::

    from cloudtrain.orchestrate import ledger
    ledger.entries(since=time.time() - 86400, providers=["sagemaker"], states=["RUNNING"],
                   text="digits", limit=50)          # -> [Entry], newest first
    ledger.entry("sagemaker://us-east-1/digits-ddp-0123456789ab")   # -> Entry or None

``Entry.duration`` (seconds run so far), ``Entry.cost`` (rate x nodes x hours, None without a
rate) and ``Entry.to_dict()`` (what ``cloudtrain list -o json`` prints) derive from the row.
Standard library only, and no provider is imported to read it: a dashboard lists 10,000 jobs in
a few milliseconds.  Writing (``record``, ``update``, ``refresh``) is for ``submit`` and ``list``.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

from ..spec.states import TERMINAL

# A cloud job's row older than this (seconds since it was last read) is read again by `list`.
STALE_SECONDS = 60.0


@dataclass
class Entry:
    handle: str
    provider: str
    job_id: str
    state: str
    submitted_at: float
    name: Optional[str] = None
    profile: Optional[str] = None
    instance_type: Optional[str] = None
    nodes: Optional[int] = None
    spot: Optional[bool] = None
    rate: Optional[float] = None          # per node and hour, in ``currency``
    currency: Optional[str] = None
    started_at: Optional[float] = None
    ended_at: Optional[float] = None
    restarts: int = 0
    emulated: Optional[str] = None        # the platform a local/docker job's nodes emulated
    message: str = ""
    tried: List[str] = field(default_factory=list)  # failover: "PROVIDER: why it moved on", in order
    refreshed_at: Optional[float] = None  # a cloud row: when it was last read from the platform
    local: bool = False                   # its state is this machine's store's (local, docker)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def duration(self, now: Optional[float] = None) -> Optional[float]:
        """Seconds it ran (until now while it runs); None before it started."""
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else (None if self.terminal else (now or time.time()))
        return None if end is None else max(0.0, end - self.started_at)

    def cost(self, now: Optional[float] = None) -> Optional[float]:
        """``rate`` x nodes x hours run so far, in ``currency``; None without a rate."""
        seconds = self.duration(now)
        if self.rate is None or seconds is None:
            return None
        return round(self.rate * (self.nodes or 1) * seconds / 3600.0, 4)

    def stale(self, now: Optional[float] = None) -> bool:
        """A cloud job still running whose row was last read more than ``STALE_SECONDS`` ago."""
        last = self.refreshed_at or self.submitted_at
        return not self.local and not self.terminal and (now or time.time()) - last > STALE_SECONDS

    def to_dict(self, now: Optional[float] = None) -> Dict[str, Any]:
        data = dict(self.__dict__, tried=list(self.tried))  # (asdict's deep copy: 5 x slower over 10,000)
        data["duration"] = self.duration(now)
        data["cost"] = self.cost(now)
        data["created_at"] = self.submitted_at  # the name list -o json gave it before the ledger
        return data


def _entry(row) -> Entry:
    data = dict(row)
    tried, spot = data["tried"], data["spot"]
    data["tried"] = json.loads(tried) if tried else []
    data["spot"] = None if spot is None else bool(spot)
    data["local"] = bool(data["local"])
    return Entry(**data)


def _store(store=None):
    if store is not None:
        return store
    from ..runtime.store import Store
    return Store()


def entries(since: Optional[float] = None, providers: Optional[Iterable[str]] = None,
            states: Optional[Iterable[str]] = None, text: Optional[str] = None, limit: Optional[int] = None,
            *, store=None) -> List[Entry]:
    """The ledger's entries, newest first: submitted at or after ``since`` (seconds since the
    epoch), on one of ``providers``, in one of ``states`` (``"RUNNING"``, ...), whose handle,
    name or instance type contains ``text``; at most ``limit``.  As stored: nothing is read
    from a platform (``refresh`` does that)."""
    where: List[str] = []
    params: List[Any] = []
    if since is not None:
        where.append("submitted_at >= ?")
        params.append(float(since))
    for column, values in (("provider", providers), ("state", states)):
        if values is not None:
            values = [str(v).upper() if column == "state" else str(v) for v in values]
            where.append(f"{column} IN ({', '.join('?' * len(values))})" if values else "0")
            params.extend(values)
    if text:
        where.append("(instr(lower(handle), ?) OR instr(lower(COALESCE(name, '')), ?) "
                     "OR instr(lower(COALESCE(instance_type, '')), ?))")
        params.extend([text.lower()] * 3)
    rows = _store(store).ledger_rows(" AND ".join(where), tuple(params), limit)
    return [_entry(r) for r in rows]


def entry(handle: str, *, store=None) -> Optional[Entry]:
    """The entry of ``handle``, or None."""
    rows = _store(store).ledger_rows("handle = ?", (handle,), 1)
    return _entry(rows[0]) if rows else None


# -- writing ----------------------------------------------------------------------------------
def rate_of(rendered) -> tuple:
    """``(instance type, rate, currency, spot)`` of a rendered job: the rate the estimate used
    (``catalogs.prices.estimate``: the instance type, the job's region, spot or on-demand as the
    provider's options say), else the instance type its provider chose (the provider's
    ``instance(job, options)`` where it has one, else its ``instance_rules``) with no rate."""
    from ..extend.plugins import get_provider_class
    job, options = rendered.job, rendered.options
    spot = getattr(options, "spot", None)
    spot = bool(spot if spot is not None else job.spot)
    try:
        from ..catalogs.prices import estimate
        est = estimate(job, rendered.provider)
    except Exception:  # noqa: BLE001
        est = None
    if est is not None and est.rate is not None:
        return est.instance_type, est.rate, est.currency, est.spot
    cls = get_provider_class(rendered.provider)
    rules = cls.instance_rules()
    choice, option = None, getattr(options, rules.option if rules else "instance_type", None)
    try:  # render checked all this already; a ledger never fails a submit
        if callable(getattr(cls, "instance", None)):
            choice = cls.instance(job, options)
        elif rules is not None:
            from ..catalogs.instances import choose
            choice = choose(job, rules, option)
    except Exception:  # noqa: BLE001
        choice = None
    chosen, row = (choice.instance_type, choice.row) if choice is not None else (None, None)
    chosen = chosen or option or job.resources.instance_type
    return chosen, None, None, spot


def record(handle: str, rendered, *, profile: Optional[str] = None, tried: Iterable[str] = (), store=None) -> None:
    """Add the job ``rendered`` was submitted as (``handle``) to the ledger."""
    from ..providers.provider import parse_handle
    provider, job_id = parse_handle(handle)
    job, options = rendered.job, rendered.options
    instance_type, rate, currency, spot = rate_of(rendered)
    _store(store).ledger_put({
        "handle": handle, "provider": provider, "job_id": job_id, "name": job.name, "profile": profile,
        "instance_type": instance_type, "nodes": job.distribution.nodes,
        "spot": int(spot), "rate": rate, "currency": currency,
        "submitted_at": time.time(), "state": "PENDING", "emulated": getattr(options, "emulate", None),
        "tried": json.dumps(list(tried)) if tried else None, "refreshed_at": time.time()})


def update(status, *, store=None, known: Optional[Entry] = None) -> None:
    """The ledger row of ``status.handle`` as the platform said (added when it is not there: a
    cloud job listed by ``list -p`` that this machine did not submit)."""
    row = {"handle": status.handle, "state": status.state.value, "message": status.message or "",
           "started_at": status.started_at, "ended_at": status.ended_at, "restarts": len(status.restarts or ()),
           "refreshed_at": time.time()}
    if status.nodes:
        row["nodes"] = status.nodes
    from ..providers.provider import parse_handle
    store = _store(store)
    provider, job_id = parse_handle(status.handle)
    row.update(provider=provider, job_id=job_id)  # (an upsert names every NOT NULL column)
    known = known or entry(status.handle, store=store)
    if known is not None:  # what the submit recorded stays
        row["submitted_at"] = known.submitted_at
    else:
        row.update(name=status.name, submitted_at=status.created_at or status.started_at or time.time())
    store.ledger_put(row)


def refresh(stale: Iterable[Entry], *, provider_for: Callable[[str, Optional[str]], Any],
            on_error: Optional[Callable[[Entry, Exception], None]] = None, store=None) -> int:
    """Read each of ``stale`` (cloud entries) from its platform again (``provider_for(name,
    profile)`` makes the provider, with the entry's settings profile) and keep what it says;
    the number read.  ``on_error(entry, exc)`` hears of a row that cannot be read (it stays as
    it was)."""
    from ..spec.errors import CloudtrainError
    store = _store(store)
    providers: Dict[tuple, Any] = {}
    done = 0
    for e in stale:
        try:
            key = (e.provider, e.profile)
            if key not in providers:
                providers[key] = provider_for(e.provider, e.profile)
            update(providers[key].status(e.job_id), store=store, known=e)
            done += 1
        except CloudtrainError as exc:
            if on_error is None:
                raise
            on_error(e, exc)
    return done


# -- the command line's words ---------------------------------------------------------------------
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since(text: str, now: Optional[float] = None) -> float:
    """``--since``: a span back from now (``90m``, ``12h``, ``7d``, ``2w``) or a date
    (``2026-11-20``, ``2026-11-20T08:00``, local time); seconds since the epoch."""
    import re
    from datetime import datetime
    from ..spec.errors import BadInput
    value = text.strip().lower()
    found = re.fullmatch(r"(\d+)\s*([smhdw])", value)
    if found:
        return (now or time.time()) - int(found.group(1)) * _UNITS[found.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise BadInput(f"--since {text!r}: expected a span back from now (90m, 12h, 7d, 2w) or a date "
                       "(2026-11-20, 2026-11-20T08:00)") from None


def span(seconds: Optional[float]) -> str:
    """``45s``, ``12m05s``, ``3h02m``, ``2d04h``; ``-`` for none."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def table(found: List[Entry], now: Optional[float] = None) -> List[tuple]:
    """The rows ``cloudtrain list`` prints, a header first."""
    now = now or time.time()
    rows = [("HANDLE", "STATE", "NODES", "INSTANCE", "SUBMITTED", "DURATION", "RESTARTS", "EMULATED", "COST",
             "MESSAGE")]
    for e in found:
        cost = e.cost(now)
        rows.append((e.handle, e.state, str(e.nodes or "-"), e.instance_type or "-",
                     time.strftime("%Y-%m-%d %H:%M", time.localtime(e.submitted_at)), span(e.duration(now)),
                     str(e.restarts), e.emulated or "-", f"{cost:.2f} {e.currency}" if cost is not None else "-",
                     (e.message or "").replace("\n", " ")[:50]))
    return rows


def cost_so_far(handle: str) -> Optional[str]:
    """``18.20 USD so far`` from the ledger's row of ``handle``; None where the cost is not known
    or the ledger cannot be read (progress goes on without it)."""
    import sqlite3
    try:
        found = entry(handle)
        cost = found.cost() if found is not None else None
    except (OSError, sqlite3.Error):
        return None
    return f"{cost:.2f} {found.currency} so far" if cost is not None and found is not None else None
