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
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from .. import api
from ..orchestrate import ledger
from ..runtime import requestlog
from ..spec.errors import CloudtrainError
from . import series


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
    return {"job": _row(e, now), "request": requestlog.read(handle), "timeline": events, "now": now,
            **_followed(handle, now)}


def _followed(handle: str, now: float) -> dict:
    """A job the controller follows (issue 41): its ``attempts`` as ``status -o json`` has them,
    and its ``plan``: where the controller is with it and its next step (``controller status``'s
    words), the cost across attempts and the budget.  Empty for any other job."""
    from ..input.homedir import home
    if not (home() / "state.db").exists():
        return {"attempts": [], "plan": None}
    from ..orchestrate import controller
    from ..runtime.store import Store, attempts_view
    store = Store()
    plan = store.plan_get(handle)
    if plan is None:
        return {"attempts": [], "plan": None}
    following = next((p for p in controller.describe(store)["following"] if p["handle"] == handle), None)
    shown = {"state": plan["state"], "step": plan["step"], "reason": plan["reason"],
             "next": following["next"] if following else "",
             "restarts": {"preemptions": plan["preemptions"], "failures": plan["failures"],
                          "max_restarts": plan["max_restarts"]},
             "spent": round(controller.spent(handle, store, now), 4), "budget": plan["budget"],
             "currency": plan["currency"], "controller_running": controller.claim() is not None}
    return {"attempts": attempts_view(handle, store, now), "plan": shown}


def metrics(handle: str) -> Optional[dict]:
    """Every metric the job reported, over steps and time (``cloudtrain.ui.series``: at most
    ``MAX_POINTS`` points per metric), its attempts, and its cost so far against its budget."""
    e = ledger.entry(handle)
    if e is None:
        return None
    from ..runtime.store import Store
    now = time.time()
    store = Store()
    plan = store.plan_get(handle)
    attempts = store.attempts(handle) if plan is not None else []
    if attempts:
        found = series.combine([({"attempt": a["attempt"], "provider": a["provider"], "handle": a["attempt_handle"],
                                  "started_at": a["started_at"], "reason": a["reason"]},
                                 _series_of(a["attempt_handle"], store))
                                for a in attempts if a["attempt_handle"]])
    else:
        found = _series_of(handle, store)
        if e.local:  # the supervisor's restarts: when (the log's note has why)
            times = {f"restart {r['attempt']}": r["at"] for r in store.get_restarts(e.job_id)}
            for a in found["attempts"]:
                a["at"] = a.get("at") or times.get(a["label"])
    found.update(handle=handle, name=e.name or e.job_id, state=e.state, started_at=e.started_at,
                 ended_at=e.ended_at, now=now, cost=_cost(e, plan, attempts, now))
    return found


def _series_of(handle: str, store) -> dict:
    """One submission's series: a local or docker job's log read here, any other's through its provider."""
    from ..providers.provider import parse_handle
    provider, job_id = parse_handle(handle)
    row = store.get_job(job_id)
    if row is not None and row["provider"] == provider:
        return series.log_file_series(Path(row["run_dir"]) / "job.log")
    try:
        return series.remote_series(handle, lambda: api.configured(provider).logs(job_id))
    except CloudtrainError as exc:  # (the platform's refusal, said; the other attempts are still drawn)
        found = series.Series().to_dict()
        found["error"] = f"{handle}: {exc}"
        return found


def _cost(e: ledger.Entry, plan: Optional[dict], attempts: List[dict], now: float) -> dict:
    """The cost so far (each attempt's nodes x rate x hours), as a curve over time, and the budget."""
    from ..runtime.store import attempt_cost
    curve: List[list] = []
    total: Optional[float] = None
    currency = e.currency
    if attempts:
        for a in attempts:
            cost = attempt_cost(a, now)
            if cost is None or a["started_at"] is None:
                continue
            total = total or 0.0
            curve += [[a["started_at"], round(total, 4)], [a["ended_at"] or now, round(total + cost, 4)]]
            total += cost
            currency = a["currency"] or currency
    else:
        total = e.cost(now)
        if total is not None and e.started_at is not None:
            curve = [[e.started_at, 0.0], [e.ended_at or now, total]]
    budget = plan["budget"] if plan else None
    currency = (plan["currency"] if plan and plan["currency"] else currency) or "USD"
    return {"so_far": None if total is None else round(total, 4), "currency": currency, "budget": budget,
            "share": round(total / budget, 4) if total is not None and budget else None, "curve": curve}


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
