"""The controller: one process per ``CLOUDTRAIN_HOME`` that follows every job that needs it to its end.

A job is a *plan*: a sequence of attempts, each a submission on some provider; the handle given
at submit (attempt 0's) names the job through all of them.  The store keeps the plans, their
attempts and an events table (``cloudtrain.runtime.store``); every change of a plan's state is a
compare-and-set guarded on the state expected (``StaleTransition`` when someone else moved it).

What the user sees (``plans.state``)::

    PENDING -> STARTING -> RUNNING <-> RECOVERING -> SUCCEEDED | FAILED | CANCELLED (with a reason)

What the controller does next (``plans.step``): ``waiting`` (attempt sent, not started),
``alive`` (running), ``launching`` (an attempt is being sent: on resume it is looked up first),
``done``.

Ownership: the lock file ``controller.lock`` in the home is ``flock``'d for the controller's
life (a second controller finds it held and ends at once), and ``controller.json`` (0600) says
who holds it: pid and process start time, so a PID reused after a reboot is never taken for it.
``ensure_running`` (called by ``submit`` and by every command that reads jobs) starts a detached
one when a plan is unfinished and none runs; a detached controller ends when nothing is left.

Resubmission: the next attempt is the same job with ``CLOUDTRAIN_RESTART_COUNT=n`` in its
environment, rendered again and sent through the provider's one submit pipeline, which looks a
job of the same spec hash up before it creates one (``CloudProvider.schedule``'s
``_find_by_spec``): an attempt whose submission may have happened (the controller killed while
sending it) is found, never sent twice.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from ..runtime import procs
from ..runtime.store import StaleTransition, Store, attempt_cost, attempts_view  # noqa: F401  (re-exported)
from ..spec.states import TERMINAL
from . import failures

LOCK_NAME = "controller.lock"
CLAIM_NAME = "controller.json"
LOG_NAME = "controller.log"
POLL = float(os.environ.get("CLOUDTRAIN_CONTROLLER_POLL", "5"))  # seconds between rounds
WARN_AT = 0.8  # of max_cost
CARRY_TRIES = 3  # failed copies of a checkpoint to the next provider before the job ends FAILED
CLAIM_WAIT = 15.0  # seconds ensure_running waits for the controller it started to hold the lock

USER_STATES = ("PENDING", "STARTING", "RUNNING", "RECOVERING", *TERMINAL)


def restarts_itself(provider: str) -> bool:
    """Whether ``provider``'s platform restarts the whole job itself after a failure (the
    provider class's ``restarts_itself``): the controller then only watches."""
    from ..extend.plugins import get_provider_class
    return bool(get_provider_class(provider).restarts_itself)


def has_runtime_limit(provider: str) -> bool:
    """Whether ``provider``'s platform stops a job at ``max_runtime`` itself (the provider class's
    ``has_runtime_limit``); when not, the controller cancels it."""
    from ..extend.plugins import get_provider_class
    return bool(get_provider_class(provider).has_runtime_limit)


def warn_restarted_by_controller(job, platform_says: str) -> None:
    """For a plugin whose platform does not restart: ``max_restarts`` is kept by the controller
    (a warning naming the field says so; the request carries no restart)."""
    import warnings
    from ..spec.errors import CloudtrainWarning, JobFileError
    warnings.warn(CloudtrainWarning(str(JobFileError.at(job, ("max_restarts",), (
        f"{platform_says}; cloudtrain's controller submits the job again after a failure restart_on covers "
        f"(at most {job.max_restarts} times; docs/controller.md)")))), stacklevel=3)


def warn_limited_by_controller(job, platform_says: str) -> None:
    """For a plugin whose platform has no run-time limit: the controller cancels at ``max_runtime``."""
    import warnings
    from ..spec.errors import CloudtrainWarning, JobFileError
    warnings.warn(CloudtrainWarning(str(JobFileError.at(job, ("max_runtime",), (
        f"{platform_says}; cloudtrain's controller cancels the job when max_runtime is reached "
        "(docs/controller.md)")))), stacklevel=3)


# -- the plan a submit leaves ------------------------------------------------------------------------
def needs_following(job, provider: str, candidates: int = 1) -> bool:
    """A job the controller must act on: restarts the platform does not make, a move to the next
    of ``candidates`` providers when the platform's own restarts ran out for want of capacity, a
    budget, or a run-time limit the platform lacks."""
    return bool((job.max_restarts and (not restarts_itself(provider) or candidates > 1))
                or job.max_cost is not None or (job.max_runtime and not has_runtime_limit(provider)))


def job_data(job) -> Dict[str, Any]:
    """What re-renders ``job`` later: its fields (code made absolute) and its file's path."""
    data = job.model_dump(mode="json", by_alias=True)
    if job.code is not None:
        data["code"] = str(job.code_path)
    source = job.source
    return {"data": data, "path": str(source.path) if source is not None and source.path else None}


def job_from_data(saved: Dict[str, Any], restart: int = 0):
    from ..input.loading import job_from_dict
    data = dict(saved["data"])
    if restart:
        data["env"] = dict(data.get("env") or {}, CLOUDTRAIN_RESTART_COUNT=str(restart))
    return job_from_dict(data, path=Path(saved["path"]) if saved.get("path") else None)


def adopt(handle: str, rendered: list, *, profile: Optional[str] = None, store: Optional[Store] = None) -> bool:
    """Make the job ``handle`` (just submitted as attempt 0, from one of ``rendered``: the
    candidates in order) a plan when it needs following; True if it does."""
    from ..providers.provider import parse_handle
    from ..catalogs.budget import budget_of
    provider, _ = parse_handle(handle)
    chosen = next((r for r in rendered if r.provider == provider), rendered[0])
    job = chosen.job
    if not needs_following(job, provider, len(rendered) - rendered.index(chosen)):
        return False
    store = store or Store()
    budget = budget_of(chosen)
    store.plan_add({"handle": handle, "state": "PENDING", "step": "waiting",
                    "candidates": json.dumps([r.provider for r in rendered]),
                    "jobs": json.dumps({r.provider: job_data(r.job) for r in rendered}), "profile": profile,
                    "restarts_itself": int(restarts_itself(provider)), "max_restarts": job.max_restarts,
                    "budget": budget[0] if budget else None, "currency": budget[1] if budget else None,
                    "max_runtime": job.max_runtime if not has_runtime_limit(provider) else None},
                   detail=f"attempt 0 on {provider}")
    _add_attempt(store, handle, 0, chosen, handle)
    return True


def _add_attempt(store: Store, handle: str, attempt: int, rendered, attempt_handle: Optional[str]) -> None:
    from ..catalogs.budget import rate as rate_of
    rate, currency = rate_of(rendered)
    store.attempt_add({"handle": handle, "attempt": attempt, "provider": rendered.provider,
                       "attempt_handle": attempt_handle, "state": "running" if attempt_handle else "submitting",
                       "nodes": rendered.job.distribution.nodes, "rate": rate, "currency": currency,
                       "started_at": None})


# -- the attempts as the user sees them ----------------------------------------------------------------
def spent(handle: str, store: Store, now: Optional[float] = None) -> float:
    return sum(c for c in (attempt_cost(r, now) for r in store.attempts(handle)) if c is not None)


# -- one controller per home ---------------------------------------------------------------------------
def _home() -> Path:
    from ..input.homedir import make_home
    return make_home()


def claim() -> Optional[Dict[str, Any]]:
    """The running controller's claim (pid, start, started_at), None when none runs."""
    try:
        data = json.loads((_home() / CLAIM_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not procs.same(data.get("pid"), data.get("start")):
        return None
    return data


class Lock:
    """The home's controller lock, held (``flock``) for as long as this process runs."""

    def __init__(self):
        self.fd: Optional[int] = None

    def acquire(self) -> bool:
        path = _home() / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.fd = fd
        from ..input.homedir import private_file
        claim_path = _home() / CLAIM_NAME
        tmp = claim_path.with_name(f".{CLAIM_NAME}.{os.getpid()}")
        tmp.write_text(json.dumps({"pid": os.getpid(), "start": procs.start_time(os.getpid()),
                                   "started_at": time.time()}))
        private_file(tmp)
        os.replace(tmp, claim_path)
        return True

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            mine = json.loads((_home() / CLAIM_NAME).read_text()).get("pid") == os.getpid()
        except (OSError, ValueError):
            mine = False
        if mine:
            (_home() / CLAIM_NAME).unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None


def ensure_running(store: Optional[Store] = None) -> Optional[int]:
    """Start a detached controller when a plan is unfinished and none runs (after a reboot, the
    next cloudtrain command does this); the new process's pid, or None."""
    store = store or Store()
    if not store.plans(unfinished=True) or claim() is not None:
        return None
    import subprocess
    log = _home() / LOG_NAME
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        child = subprocess.Popen([sys.executable, "-m", "cloudtrain", "controller", "--detached"],
                                 stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True,
                                 close_fds=True)
    finally:
        os.close(fd)
    deadline = time.monotonic() + CLAIM_WAIT  # the command that started it returns once it runs
    while time.monotonic() < deadline and child.poll() is None and claim() is None:
        time.sleep(0.02)
    return child.pid


def stop() -> Optional[int]:
    """SIGTERM to the running controller (its pid and start time must match); its pid, or None."""
    found = claim()
    if found is None:
        return None
    return found["pid"] if procs.signal_process(found["pid"], found["start"], signal.SIGTERM) else None


# -- the loop -------------------------------------------------------------------------------------------
class Controller:
    """Follows every unfinished plan of the store: one round (``tick``) reads each plan's current
    attempt and takes the next step; ``run`` repeats it until stopped (or, ``detached``, until no
    plan is left)."""

    def __init__(self, store: Optional[Store] = None, *, provider_for: Callable[[str, Optional[str]], Any],
                 render: Optional[Callable] = None, send: Optional[Callable] = None, poll: float = POLL, out=None):
        """``provider_for(name, profile)``: the provider to act through (``cloudtrain.api.controller``
        gives the provider with the account settings of the config files); ``render(provider, job)``
        and ``send(provider, rendered)``: how an attempt is rendered and sent (there: with the
        plugins' hooks; default: the provider's own ``render``/``submit``)."""
        self.store = store or Store()
        self.provider_for = provider_for
        self._render = render or (lambda provider, job: provider.render(job, submit=True))
        self._send = send or (lambda provider, rendered: provider.submit(rendered))
        self.poll = poll
        self.out = out or sys.stderr
        self.stopping = False
        self._providers: Dict[tuple, Any] = {}

    def say(self, text: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}", file=self.out, flush=True)

    def provider(self, name: str, profile: Optional[str]):
        key = (name, profile)
        if key not in self._providers:
            self._providers[key] = self.provider_for(name, profile)
        return self._providers[key]

    def run(self, detached: bool = False) -> int:
        lock = Lock()
        if not lock.acquire():
            found = claim()
            self.say(f"another controller runs for this home (pid {found['pid'] if found else '?'}); ending")
            return 1
        previous = signal.signal(signal.SIGTERM, self._on_term)
        try:
            self.say(f"controller {os.getpid()} follows {len(self.store.plans())} job(s)")
            while not self.stopping:
                left = self.tick()
                if detached and not left:
                    self.say("nothing left to follow; ending")
                    break
                end = time.monotonic() + self.poll
                while not self.stopping and time.monotonic() < end:
                    time.sleep(min(0.2, self.poll))
        finally:
            signal.signal(signal.SIGTERM, previous)
            lock.release()
        return 0

    def _on_term(self, signum, frame) -> None:
        self.stopping = True

    def tick(self) -> int:
        """One round over every unfinished plan; the number still unfinished."""
        left = 0
        for plan in self.store.plans(unfinished=True):
            try:
                self.step(plan)
            except StaleTransition as exc:  # someone else moved it: read it again next round
                self.say(f"{plan['handle']}: {exc}")
            except Exception as exc:  # noqa: BLE001  (one job's trouble never stops the others)
                self.say(f"{plan['handle']}: {type(exc).__name__}: {exc}")
            now = self.store.plan_get(plan["handle"])
            if now is not None and now["state"] not in TERMINAL:
                left += 1
        return left

    # -- one plan ---------------------------------------------------------------------------------------
    def step(self, plan: Dict[str, Any]) -> None:
        handle = plan["handle"]
        attempts = self.store.attempts(handle)
        current = attempts[-1]
        if current["state"] == "submitting":  # a submission that may have happened: look it up, then send
            self.send(plan, current)
            return
        provider = self.provider(current["provider"], plan["profile"])
        from ..providers.provider import parse_handle
        _, job_id = parse_handle(current["attempt_handle"])
        if plan["cancel_requested"]:
            self.end_attempt(plan, current, provider, job_id, "CANCELLED", "cancelled", cancel=True)
            return
        status = provider.status(job_id)
        # when it started, by the platform's clock; for a platform whose status has no start time
        # (Azure ML's job entity), the round that first saw it running or ended
        started = status.started_at or (time.time() if status.state.value == "RUNNING" or status.terminal else None)
        if started is not None and current["started_at"] is None:
            self.store.attempt_move(handle, current["attempt"], "running", started_at=started)
            current["started_at"] = started
        if status.terminal:
            self.attempt_ended(plan, current, status)
            return
        shown = {"PENDING": "PENDING", "STARTING": "STARTING", "RUNNING": "RUNNING"}.get(status.state.value)
        if shown and plan["state"] != shown and not (plan["state"] == "RECOVERING" and shown == "PENDING"):
            self.store.plan_move(handle, plan["state"], event=shown.lower(), state=shown,
                                 step="alive" if shown == "RUNNING" else "waiting", next_step="")
            self.store.ledger_update(handle, state=shown)
            plan["state"] = shown
        self.check_limits(plan, current, provider, job_id)

    def check_limits(self, plan, current, provider, job_id) -> None:
        handle = plan["handle"]
        if plan["budget"] is not None:
            cost = spent(handle, self.store)
            shown = f"{plan['budget']:g} {plan['currency'] or ''}".strip()
            if cost >= plan["budget"]:
                self.end_attempt(plan, current, provider, job_id, "CANCELLED", f"max_cost {shown} reached",
                                 cancel=True)
                return
            if cost >= WARN_AT * plan["budget"] and not plan["warned"]:
                self.store.plan_move(handle, plan["state"], event="warning",
                                     detail=f"{cost:.2f} of max_cost {shown} spent (80 %)", warned=1)
                self.say(f"{handle}: warning: {cost:.2f} of max_cost {shown} spent")
        if plan["max_runtime"] and current["started_at"] is not None:
            first = min(a["started_at"] for a in self.store.attempts(handle) if a["started_at"] is not None)
            if time.time() - first >= plan["max_runtime"]:
                from ..spec.durations import format_duration
                self.end_attempt(plan, current, provider, job_id, "FAILED",
                                 f"max_runtime {format_duration(plan['max_runtime'])} reached", cancel=True)

    def end_attempt(self, plan, current, provider, job_id, state: str, reason: str, *, cancel: bool) -> None:
        """Stop the current attempt (``cancel``) and end the plan in ``state`` with ``reason``."""
        handle = plan["handle"]
        if cancel:
            provider.cancel(job_id)
        self.store.attempt_move(handle, current["attempt"], ("running", "submitting"), state="ended",
                                ended_at=time.time(), reason=reason)
        self.finish(plan, state, reason)

    def finish(self, plan, state: str, reason: str) -> None:
        self.store.plan_move(plan["handle"], plan["state"], event=state.lower(), detail=reason, state=state,
                             step="done", reason=reason, next_step="")
        self.store.ledger_update(plan["handle"], state=state, message=reason, ended_at=time.time(),
                                 restarts=len(self.store.attempts(plan["handle"])) - 1)
        self.say(f"{plan['handle']}: {state.lower()}: {reason}")

    def attempt_ended(self, plan, current, status) -> None:
        handle, n = plan["handle"], current["attempt"]
        ended = status.ended_at or time.time()
        kind, words = failures.classify(current["provider"], status.message, status.exit_code)
        here = current["provider"]
        candidates = json.loads(plan["candidates"])
        after: Optional[str] = (candidates[candidates.index(here) + 1]
                                if candidates.index(here) + 1 < len(candidates) else None)
        # A platform that restarts by itself has used its own restarts when it reports a failure:
        # the controller adds none there, but moves a job the platform gave up on for want of
        # capacity (SageMaker's managed spot past MaxWaitTimeInSeconds, a CapacityError) to the
        # next provider of -p a,b,c.
        moves = kind in failures.PLATFORM_KINDS and after is not None
        if status.state.value != "FAILED" or (restarts_itself(here) and not moves):
            reason = status.message or status.state.value.lower()
            self.store.attempt_move(handle, n, "running", state="ended", ended_at=ended, reason=reason,
                                    started_at=current["started_at"] or status.started_at)
            self.finish(plan, status.state.value, reason)
            return
        reason = kind if kind != failures.EXIT_CODE else f"exit code {words}"
        job = job_from_data(json.loads(plan["jobs"])[here])
        budget = "preemptions" if kind in failures.PLATFORM_KINDS else "failures"
        refused = None
        if not failures.covered(kind, words, job.restart_on):
            refused = f"{reason} on {here} (restart_on does not cover it): {status.message}"
        elif plan[budget] >= plan["max_restarts"]:
            refused = (f"{reason} on {here}, and max_restarts ({plan['max_restarts']}) {budget} were used: "
                       f"{status.message}")
        where: str = after if after is not None and moves and refused is None else here
        ended_as = dict(state="ended", ended_at=ended, kind=kind,
                        reason=f"{reason}: {status.message}".strip(": ")[:500],
                        started_at=current["started_at"] or status.started_at)
        if where != here and not self.carry_checkpoint(plan, here, where):
            if (self.store.plan_get(handle) or {}).get("state") in TERMINAL:  # it gave up
                self.store.attempt_move(handle, n, "running", **ended_as)
            return  # else tried again next round; the attempt stays as it is until then
        self.store.attempt_move(handle, n, "running", **ended_as)
        if refused is not None:
            self.finish(plan, "FAILED", refused[:500])
            return
        used = plan[budget] + 1
        nxt = f"restarting on {where} after a {reason} on {here} ({used}/{plan['max_restarts']})"
        self.store.plan_move(handle, plan["state"], event="recovering", detail=nxt, state="RECOVERING",
                             step="launching", next_step=nxt, restarts_itself=int(restarts_itself(where)),
                             **{budget: used})
        plan.update(state="RECOVERING", step="launching", **{budget: used})
        self.say(f"{handle}: {nxt}")
        rendered = self.render(plan, where, n + 1)
        _add_attempt(self.store, handle, n + 1, rendered, None)
        self.send(plan, self.store.attempts(handle)[-1], rendered)

    def carry_checkpoint(self, plan, here: str, there: str) -> bool:
        """Copy the checkpoint ``here``'s attempts left to ``there``'s store before the next
        attempt goes there (``cloudtrain.orchestrate.checkpoints``); False when it could not be
        copied (an event says why; the controller tries again next round, and after
        ``CARRY_TRIES`` failed tries the job ends FAILED rather than start over without it)."""
        from . import checkpoints
        from ..transfer.objectstore import ObjectUrl
        jobs = json.loads(plan["jobs"])
        source_job, target_job = job_from_data(jobs[here]), job_from_data(jobs[there])
        source, target = checkpoints.location(source_job), checkpoints.location(target_job)
        if source is None or source == target:
            return True
        handle = plan["handle"]
        why = checkpoints.problems([(here, source_job), (there, target_job)])
        if why or target is None:  # validate said so before the job was sent; the move goes on without it
            said = why[0] if why else f"{there} keeps no checkpoint"
            self.store.plan_move(handle, plan["state"], event="checkpoint", detail=said[:500])
            self.say(f"{handle}: {said}")
            return True
        try:
            src_url, dst_url = ObjectUrl.parse(source), ObjectUrl.parse(target)
            done = checkpoints.carry(
                checkpoints.store_for(self.provider(here, plan["profile"]), src_url, source_job), src_url,
                checkpoints.store_for(self.provider(there, plan["profile"]), dst_url, target_job), dst_url)
        except Exception as exc:  # noqa: BLE001  (a store's error: said, tried again)
            detail = f"the checkpoint could not be carried from {here} ({source}) to {there} ({target}): {exc}"
            self.store.plan_move(handle, plan["state"], event="checkpoint-failed", detail=detail[:500])
            self.say(f"{handle}: {detail}")
            tries = sum(e["event"] == "checkpoint-failed" for e in self.store.events(handle))
            if tries >= CARRY_TRIES:
                self.finish(plan, "FAILED", f"{detail} ({tries} tries)"[:500])
            return False
        self.store.plan_move(handle, plan["state"], event="checkpoint", detail=str(done)[:500])
        self.say(f"{handle}: {done}")
        return True

    def render(self, plan, provider: str, attempt: int):
        saved = json.loads(plan["jobs"])[provider]
        return self._render(self.provider(provider, plan["profile"]), job_from_data(saved, attempt))

    def send(self, plan, current, rendered=None) -> None:
        """Send attempt ``current`` (state ``submitting``): the provider's submit pipeline finds a
        job of the same spec that an earlier try sent, before it creates one."""
        rendered = rendered or self.render(plan, current["provider"], current["attempt"])
        run = self._send(self.provider(current["provider"], plan["profile"]), rendered)
        self.store.attempt_move(plan["handle"], current["attempt"], "submitting", state="running",
                                attempt_handle=run.handle)
        self.store.plan_move(plan["handle"], ("RECOVERING", "PENDING"), event="submitted",
                             detail=f"attempt {current['attempt']} on {current['provider']}: {run.handle}",
                             step="waiting")
        self.store.ledger_update(plan["handle"], state="RECOVERING", restarts=current["attempt"])


def describe(store: Optional[Store] = None) -> Dict[str, Any]:
    """``cloudtrain controller status``: who runs, the plans it follows and the next step of each."""
    store = store or Store()
    plans = []
    for plan in store.plans(unfinished=True):
        attempts = store.attempts(plan["handle"])
        current = attempts[-1] if attempts else None
        plans.append({"handle": plan["handle"], "state": plan["state"], "step": plan["step"],
                      "attempt": current["attempt"] if current else None,
                      "provider": current["provider"] if current else None,
                      "next": "; ".join(filter(None, (plan["next_step"], _next(plan, current))))
                      if current is not None and current["state"] == "submitting"
                      else plan["next_step"] or _next(plan, current),
                      "restarts": {"preemptions": plan["preemptions"], "failures": plan["failures"],
                                   "max_restarts": plan["max_restarts"]},
                      "spent": spent(plan["handle"], store), "budget": plan["budget"],
                      "currency": plan["currency"]})
    return {"controller": claim(), "following": plans}


def _next(plan, current) -> str:
    if current is None:
        return ""
    if current["state"] == "submitting":
        return f"look up and send attempt {current['attempt']} on {current['provider']}"
    if plan["restarts_itself"]:
        return f"watch {current['attempt_handle']} (the platform restarts it)"
    return (f"watch {current['attempt_handle']}; restart after a failure restart_on covers "
            f"({plan['preemptions']} preemption(s), {plan['failures']} failure(s) of {plan['max_restarts']} used)")
