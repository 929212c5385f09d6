"""A job the controller follows, as the Python API and the command line see it: one ``Run``
whose handle (attempt 0's) names the job through every attempt.

``status`` is the current attempt's, with the plan's state and reason on top (``RECOVERING``
while the next attempt is being sent: ``raw_state``), and ``attempts``; ``wait`` and
``logs(follow=True)`` go on across attempts; ``cancel`` stops the plan (a flag the controller
reads, so no next attempt is sent) and the current attempt.
"""
from __future__ import annotations

import time
from typing import Callable, Iterator, List, Optional

from ..providers.provider import JobStatus, Provider, Run, parse_handle
from ..runtime.store import StaleTransition, Store, attempts_view
from ..spec.states import TERMINAL, State

PLAN_STATES = {"PENDING": State.PENDING, "STARTING": State.STARTING, "RUNNING": State.RUNNING,
               "RECOVERING": State.STARTING, "SUCCEEDED": State.SUCCEEDED, "FAILED": State.FAILED,
               "CANCELLED": State.CANCELLED}


class PlanRun(Run):
    """``provider_for(name)``: the provider of that name to read and act through (``cloudtrain.api``
    gives it the account settings of the config files)."""

    def __init__(self, handle: str, provider_for: Callable[[str], Provider], store: Optional[Store] = None):
        name, job_id = parse_handle(handle)
        super().__init__(provider_for(name), job_id)
        self.job_handle, self.provider_for = handle, provider_for
        self.store = store or Store()

    @property
    def handle(self) -> str:
        return self.job_handle

    @property
    def attempts(self) -> List[dict]:
        return attempts_view(self.job_handle, self.store)

    def _current(self) -> Optional[Run]:
        rows = self.store.attempts(self.job_handle)
        if not rows or not rows[-1]["attempt_handle"]:
            return None
        return self._attempt(rows[-1]["attempt_handle"])

    def _attempt(self, attempt_handle: str) -> Run:
        name, job_id = parse_handle(attempt_handle)
        return Run(self.provider if name == self.provider.name else self.provider_for(name), job_id)

    def status(self) -> JobStatus:
        plan = self.store.plan_get(self.job_handle)
        current = self._current()
        status = current.status() if current is not None else JobStatus(self.job_handle, State.STARTING)
        if plan is None:
            return status
        status.handle = self.job_handle
        if plan["state"] in TERMINAL or plan["state"] == "RECOVERING" or current is None:
            status.state = PLAN_STATES[plan["state"]]
            status.raw_state = plan["state"]
            status.message = plan["reason"] or plan["next_step"] or status.message
        status.restarts = [{"attempt": a["attempt"], "reason": a["reason"], "at": a["started_at"]}
                           for a in self.attempts[1:]]
        status.attempts = self.attempts
        return status

    def wait(self, timeout: Optional[float] = None, on_status=None, poll: Optional[float] = None) -> JobStatus:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if on_status is not None:
                on_status(status)
            plan = self.store.plan_get(self.job_handle)
            if plan is None and status.terminal or plan is not None and plan["state"] in TERMINAL:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{self.job_handle} still {status.raw_state or status.state.value} after {timeout}s")
            time.sleep(self.provider.status_poll if poll is None else poll)

    def logs(self, follow: bool = False):
        if not follow:
            current = self._current()
            return current.logs() if current is not None else super().logs()
        return self._follow_logs()

    def _follow_logs(self) -> Iterator[str]:
        seen = -1
        while True:
            rows = self.store.attempts(self.job_handle)
            for row in rows:
                if row["attempt"] <= seen or not row["attempt_handle"]:
                    continue
                if row["attempt"] > 0:
                    yield f"--- attempt {row['attempt']} on {row['provider']} ({row['attempt_handle']}) ---\n"
                yield from self._attempt(row["attempt_handle"]).logs(follow=True)
                seen = row["attempt"]
            plan = self.store.plan_get(self.job_handle)
            if plan is None or plan["state"] in TERMINAL:
                return
            time.sleep(1.0)

    def cancel(self) -> JobStatus:
        self.store.plan_flag(self.job_handle, cancel_requested=1, next_step="cancel")
        current = self._current()
        if current is not None:
            current.cancel()
        plan = self.store.plan_get(self.job_handle)
        if plan is not None and plan["state"] not in TERMINAL:
            try:
                self.store.plan_move(self.job_handle, plan["state"], event="cancelled", detail="cancel",
                                     state="CANCELLED", step="done", reason="cancelled", next_step="")
                rows = self.store.attempts(self.job_handle)
                if rows and rows[-1]["state"] != "ended":
                    self.store.attempt_move(self.job_handle, rows[-1]["attempt"], ("running", "submitting"),
                                            state="ended", ended_at=time.time(), reason="cancelled")
                self.store.ledger_update(self.job_handle, state="CANCELLED", message="cancelled", ended_at=time.time())
            except StaleTransition:
                pass  # the controller moved it meanwhile: its state stands
        return self.status()
