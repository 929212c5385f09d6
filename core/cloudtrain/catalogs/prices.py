"""What a job costs before it is sent: ``nodes x rate`` per hour from the provider's catalog
(the instance type it resolved, in the job's region, spot when ``spot: true`` and the row has
a spot rate), and ``x max_runtime`` as a ceiling.  ``max_hourly_cost`` refuses a job whose
hourly estimate is above it, or whose rate the catalog does not know (exit 2 either way).

Standard library only; reads the catalog the provider already read to resolve the instance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..spec.errors import JobFileError
from ..spec.job import JobSpec


@dataclass(frozen=True)
class Estimate:
    provider: str
    instance_type: Optional[str]
    nodes: int
    rate: Optional[float]            # per instance-hour
    currency: Optional[str]
    region: Optional[str]            # the region whose rate it is ("*": every region; None: unknown)
    spot: bool                       # the rate is a spot rate
    note: Optional[str] = None       # why there is no rate
    max_hours: Optional[float] = None
    idle_hours: float = 0.0          # billed per node after the job (a SageMaker warm pool's keep-alive)
    spot_unknown: bool = False       # spot was asked for, the catalog has no spot rate there: the rate is on-demand

    @property
    def hourly(self) -> Optional[float]:
        return None if self.rate is None else self.rate * self.nodes

    @property
    def ceiling(self) -> Optional[float]:
        if self.hourly is None or self.max_hours is None:
            return None
        return self.hourly * (self.max_hours + self.idle_hours)

    def line(self) -> str:
        if self.instance_type is None:
            return f"estimate: none ({self.provider}: {self.note})"
        rate, hourly = self.rate, self.hourly
        if rate is None or hourly is None:
            return f"estimate: none ({self.nodes} x {self.instance_type}: {self.note})"
        where = "every region" if self.region in (None, "*") else self.region
        if self.note:  # no region known: the cheapest region the catalog prices
            where += ", the cheapest listed; the job's region is unknown"
        text = (f"estimate: {self.nodes} x {self.instance_type} at {_money(rate)} {self.currency}/h "
                f"({'spot' if self.spot else 'on-demand'}{'; spot price unknown' if self.spot_unknown else ''}, "
                f"{where}) = {_money(hourly)} {self.currency}/h")
        if self.ceiling is not None:
            text += f"; at most {_money(self.ceiling)} {self.currency} for max_runtime {self.max_hours:g}h"
            if self.idle_hours:
                text += f" and a warm pool kept {self.idle_hours:g}h"
        return text


def _money(value: float) -> str:
    return f"{value:,.2f}" if value >= 1 else f"{value:.4g}"


@dataclass(frozen=True)
class Billing:
    """What the provider's options (the ones its render reads) say about the bill."""
    region: Optional[str]
    spot: bool
    max_seconds: Optional[float]
    idle_seconds: float
    sized_elsewhere: Optional[str] = None   # the nodes' size is not the job's to choose (a named cluster's)


def billing(job: JobSpec, cls, rules) -> Billing:
    """The provider's own options, as its render reads them (``cls.options(job)``: the section
    with the neutral fields in it): ``region`` (eks, ec2, sagemaker), ``spot`` (ec2, sagemaker) or
    ``job_tier: spot`` (azure), ``max_runtime_seconds`` (the stopping condition, its default
    included), ``keep_alive_seconds`` (a SageMaker warm pool keeps every instance that long after
    the job, billed: KeepAlivePeriodInSeconds)."""
    try:  # validate reported what is wrong with them; an estimate never fails on its own
        options = cls.options(job)
    except Exception:  # noqa: BLE001
        options = None
    region = getattr(options, "region", None) or rules.region(job)
    spot = bool(job.spot or getattr(options, "spot", False) is True or getattr(options, "job_tier", None) == "spot")
    runtime = getattr(options, "max_runtime_seconds", None) or job.max_runtime
    idle = getattr(options, "keep_alive_seconds", None) or 0
    # an Azure compute cluster runs on its own VM size, which the render leaves alone (read at
    # submit, cloudtrain_azure.render.known_vm_size): no size is resolved from the job for it
    cluster = getattr(options, "compute", None)
    elsewhere = None
    if cluster and not getattr(options, rules.option, None):
        elsewhere = f"the compute cluster {cluster} runs on its own VM size, read at submit; set {rules.option}"
    return Billing(region, spot, None if runtime is None else float(runtime), float(idle), elsewhere)


def estimate(job: JobSpec, provider: str) -> Estimate:
    """The job's estimate on ``provider`` (the instance its rules resolve; no SDK call), with the
    provider's settings its render honours (``billing``)."""
    from ..extend.plugins import get_provider_class
    nodes = job.distribution.nodes
    hours = None if job.max_runtime is None else float(job.max_runtime) / 3600
    cls = get_provider_class(provider)
    rules = cls.instance_rules()
    if rules is None:  # local, docker: no catalog to read (nor its modules to import)
        return Estimate(provider, None, nodes, None, None, None, False, "no instance catalog, no price", hours)
    from .instances import choose
    bill = billing(job, cls, rules)
    if bill.sized_elsewhere:
        return Estimate(provider, None, nodes, None, None, None, False, bill.sized_elsewhere, hours)
    choice = choose(job, rules, (job.providers.get(provider) or {}).get(rules.option))
    if choice is None or choice.row is None:
        name = choice.instance_type if choice else None
        return Estimate(provider, name, nodes, None, None, None, False,
                        "no instance type resolved from the job" if name is None else "not in the catalog, no price",
                        hours)
    hours = None if bill.max_seconds is None else bill.max_seconds / 3600
    row, region = choice.row, bill.region
    found = row.price_in(region)
    if found is None or found.on_demand is None and not (bill.spot and found.spot is not None):
        where = f" in {region}" if region else ""
        return Estimate(provider, row.instance_type, nodes, None, row.currency, region, False,
                        f"no price{where} in the catalog: {row.price_note or 'none published'}", hours,
                        bill.idle_seconds / 3600)
    spot = bool(bill.spot and found.spot is not None)
    rate = found.spot if spot else found.on_demand
    note = None if region else "region unknown"
    return Estimate(provider, row.instance_type, nodes, rate, row.currency or "USD", found.region, spot, note, hours,
                    bill.idle_seconds / 3600, spot_unknown=bill.spot and not spot)


def check_max_hourly_cost(job: JobSpec, est: Estimate) -> None:
    """Exit 2 (``JobFileError`` at ``max_hourly_cost``) when the estimate is above it or unknown."""
    cap = getattr(job, "max_hourly_cost", None)
    if cap is None:
        return
    rate, hourly = est.rate, est.hourly
    if rate is None or hourly is None:
        raise JobFileError.at(job, ("max_hourly_cost",),
                              f"is {cap:g}, but {est.provider} has no price for this job ({est.note}); drop "
                              "max_hourly_cost, or refresh the catalog (cloudtrain catalog refresh -p "
                              f"{est.provider})")
    if hourly > cap:
        raise JobFileError.at(job, ("max_hourly_cost",),
                              f"the estimate {_money(hourly)} {est.currency}/h ({est.nodes} x {est.instance_type} "
                              f"at {_money(rate)}) is above max_hourly_cost {cap:g} {est.currency}/h; lower "
                              "distribution.nodes, choose a cheaper accelerator, or raise max_hourly_cost")


def announce(job: JobSpec, provider: str, out, check: bool = True) -> Estimate:
    """Print the estimate line to ``out`` and (``check``) apply ``max_hourly_cost``. A provider
    without a catalog (local, docker) prints nothing."""
    est = estimate(job, provider)
    if est.instance_type is not None or getattr(job, "max_hourly_cost", None) is not None:
        print(est.line(), file=out, flush=True)
    if check:
        check_max_hourly_cost(job, est)
    return est
