"""``max_cost``: a budget for the whole job, every attempt (the controller enforces it).

At validate: with no known rate for the job (``cloudtrain.catalogs.prices.estimate``), a budget
cannot be kept, so ``max_cost`` is exit 2 at the field, never skipped; a currency other than the
catalog's is exit 2 too (no exchange rates are guessed); when ``max_runtime`` x the rate is above
the budget, a warning says the budget will end the job first.  While the job runs, the
controller adds up each attempt's nodes x rate x hours (``controller.spent``), warns at 80 % and
cancels at 100 % with the reason ``max_cost 500 USD reached``.
"""
from __future__ import annotations

import warnings
from typing import Optional, Tuple

from ..spec.errors import CloudtrainWarning, JobFileError


def check_max_cost(job, est) -> None:
    """Exit 2 at ``max_cost`` without a rate or in another currency; a warning when
    ``max_runtime`` x the rate exceeds it."""
    budget = job.budget
    if budget is None:
        return
    if est.rate is None or est.hourly is None:
        raise JobFileError.at(job, ("max_cost",), f"is {budget.shown()}, but {est.provider} has no price for this job "
                              f"({est.note}), so the cost so far cannot be known; drop max_cost, or refresh the "
                              f"catalog (cloudtrain catalog refresh -p {est.provider})")
    currency = est.currency or "USD"
    if budget.currency is not None and budget.currency != currency:
        raise JobFileError.at(job, ("max_cost",), f"is in {budget.currency}, but {est.provider}'s catalog prices in "
                              f"{currency}; write it in {currency} (e.g. max_cost: '{budget.amount:g} {currency}')")
    if est.ceiling is not None and est.ceiling > budget.amount:
        warnings.warn(CloudtrainWarning(str(JobFileError.at(
            job, ("max_cost",), f"max_runtime x the rate ({est.ceiling:,.2f} {currency}) is above max_cost "
            f"{budget.shown(currency)}: the budget ends the job first"))), stacklevel=2)


def budget_of(rendered) -> Optional[Tuple[float, str]]:
    """``(amount, currency)`` of a rendered job's ``max_cost`` (the catalog's currency when it names none)."""
    budget = rendered.job.budget
    if budget is None:
        return None
    from .prices import estimate
    return budget.amount, budget.currency or estimate(rendered.job, rendered.provider).currency or "USD"


def rate(rendered) -> Tuple[Optional[float], Optional[str]]:
    """The rate per node and hour of the job's real instance type, region and spot, and its currency."""
    from .prices import estimate
    est = estimate(rendered.job, rendered.provider)
    return est.rate, est.currency
