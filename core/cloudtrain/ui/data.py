"""What the dashboard shows, from the ledger and the providers: plain data, no web in here.

Each function answers one of the page's questions; the web app only turns them into JSON.
Reading jobs touches the local store only (no platform is asked: ``cloudtrain list
--refresh`` does that), so the jobs page stays fast with 10,000 rows; a job's logs, cancel and
outputs go through its provider as ``cloudtrain logs/cancel/outputs`` do.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Dict, Iterator, List, Optional

from .. import api
from ..orchestrate import ledger
from ..runtime import requestlog


def jobs(*, providers: Optional[List[str]] = None, states: Optional[List[str]] = None, since: Optional[str] = None,
         text: Optional[str] = None, limit: int = 500) -> dict:
    """The newest ``limit`` rows of the ledger with the filters of ``cloudtrain list``; ``more``:
    more rows match (only the newest are read: the page asks every 2 seconds)."""
    now = time.time()
    limit = max(1, min(limit, 10000))
    found = ledger.entries(since=ledger.since(since, now) if since else None, providers=providers,
                           states=states, text=text, limit=limit + 1)
    from ..catalogs.costnote import missing
    return {"now": now, "more": len(found) > limit, "jobs": [_row(e, now) for e in found[:limit]],
            "providers": _providers(), "cost_missing": missing(found[:limit], now)}


def _providers() -> List[str]:
    """Every provider installed here, for the filter (listing them imports none)."""
    from ..extend.plugins import providers
    return sorted(providers())


def _row(e: ledger.Entry, now: float) -> dict:
    """``Entry.to_dict`` without its deep copy (``asdict``: half the time of 500 rows)."""
    data = dict(vars(e))
    data["duration"] = e.duration(now)
    data["cost"] = e.cost(now)
    data["duration_text"] = ledger.span(data["duration"])
    return data


def job(handle: str) -> Optional[dict]:
    """One job: its ledger row, the request it was submitted with (secrets masked, as rendered),
    and its timeline (submitted, started, each restart, ended)."""
    e = ledger.entry(handle)
    if e is None:
        return None
    now = time.time()
    restarts: List[dict] = []
    if e.local:  # the store has each restart's time and reason
        from ..runtime.store import Store
        restarts = Store().get_restarts(e.job_id)
    events = [{"at": e.submitted_at, "what": "submitted"}]
    if e.started_at:
        events.append({"at": e.started_at, "what": "started"})
    events += [{"at": r.get("at"), "what": f"restart {r.get('attempt')}", "detail": r.get("reason") or ""}
               for r in restarts if r.get("at")]
    if e.ended_at:
        events.append({"at": e.ended_at, "what": e.state.lower(), "detail": e.message})
    return {"job": _row(e, now), "request": requestlog.read(handle), "timeline": events, "now": now}


def logs(handle: str) -> Iterator[str]:
    """The job's log lines, following it while it runs (as ``cloudtrain logs -f``)."""
    run = api.attach(handle)
    yield from run.logs(follow=not run.status().terminal)


def cancel(handle: str) -> dict:
    status = api.cancel(handle)
    ledger.update(status, known=ledger.entry(handle))
    return status.to_dict()


def outputs(handle: str) -> dict:
    """Download the job's output to this machine (``./outputs/<id>`` of where ``cloudtrain ui``
    runs, as ``cloudtrain outputs`` does); the files."""
    files = api.outputs(handle)
    return {"files": [str(f) for f in files]}


def resources(*, accelerator: Optional[str] = None, gpus: Optional[int] = None,
              provider: Optional[str] = None) -> dict:
    """The catalog rows that match, across providers (``cloudtrain resources -o json``)."""
    from ..catalogs import resources as res
    return {"rows": json.loads(res.rows_json(res.matching(accelerator, gpus, provider)))}


def costs(*, since: Optional[str] = None) -> dict:
    """Cost per provider per day (by the day a job ran, in each row's currency) for the chart,
    the total per provider and currency, and per provider why some jobs have no cost and how to
    get it (``unpriced_why``, as ``cloudtrain list`` says under its table)."""
    from ..catalogs.costnote import missing
    now = time.time()
    found = ledger.entries(since=ledger.since(since, now) if since else None)
    per_day: Dict[tuple, float] = defaultdict(float)
    totals: Dict[tuple, float] = defaultdict(float)
    unpriced: Dict[str, int] = defaultdict(int)
    for e in found:
        cost = e.cost(now)
        if cost is None:
            unpriced[e.provider] += 1
            continue
        day = time.strftime("%Y-%m-%d", time.localtime(e.started_at or e.submitted_at))
        per_day[(day, e.provider, e.currency or "USD")] += cost
        totals[(e.provider, e.currency or "USD")] += cost
    return {"days": [{"day": d, "provider": p, "currency": c, "cost": round(v, 4)}
                     for (d, p, c), v in sorted(per_day.items())],
            "totals": [{"provider": p, "currency": c, "cost": round(v, 4)} for (p, c), v in sorted(totals.items())],
            "unpriced": dict(unpriced), "unpriced_why": missing(found, now)}
