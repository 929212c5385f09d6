"""From (accelerator, count, minimums, ``network.rdma``) to one instance type of a platform.

The rules, the same for every provider that has a catalog:

1. ``providers.<p>.<option>`` (the platform's own name) always wins; it is checked against the
   catalog: its accelerator count must equal ``resources.gpus_per_node`` (exit 2 otherwise).
2. ``resources.instance_type`` is used when this platform's catalog has it (or when it is
   spelled the platform's way but newer than the catalog); an instance type of another platform
   is never sent raw: its accelerator and count are resolved here instead, with a warning.
3. ``resources.accelerator`` x ``gpus_per_node``: exactly that count; then the smallest
   (the cheapest when every candidate is priced, else by vCPUs, memory) with at least ``cpus_per_node`` vCPUs and
   ``memory_gb`` GiB; with ``network.rdma: on``, the smallest with a fast network.
4. ``gpus_per_node`` alone: the provider's default accelerators, in order, and one warning line
   that says which instance it picked.
5. Regions (when the provider knows the job's region and the row lists regions): 3 and 4 pick
   only among types the catalog lists in that region (exit 2 naming where it is offered when
   none is); a type named by 1 or 2 and not listed there is a warning, not a refusal: the
   catalog is a snapshot, the platform answers for its own regions (docs/resources.md).
6. A retired row (``retired``) is never picked nor suggested; naming one warns with the date
   and source (a compute cluster made before the date may still run it).

Errors are ``file:line: field: message`` with the fix (exit 2).
"""
from __future__ import annotations

import functools
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .catalog import Catalog, Instance, smallest
from ..spec.errors import CloudtrainWarning, JobFileError
from ..spec.job import JobSpec


@dataclass(frozen=True)
class InstanceRules:
    """How one provider names and picks its instances."""

    provider: str
    catalog: Callable[[], Catalog]
    option: str = "instance_type"                       # providers.<provider>.<option>
    owns: Callable[[str], bool] = lambda name: False     # spelled this platform's way (maybe newer than the catalog)
    to_own: Callable[[str], str] = lambda name: name     # resources.instance_type in this platform's spelling
    defaults: Tuple[str, ...] = ()                       # accelerators for gpus_per_node without one, in order
    noun: str = "instance type"
    hint: Callable[[], str] = lambda: ""                 # added to "none with that accelerator x count" errors
    region: Callable[[JobSpec], Optional[str]] = lambda job: None  # the job's region, when known offline


@dataclass(frozen=True)
class Choice:
    instance_type: str
    row: Optional[Instance]       # None: not in the catalog (an explicit name newer than it)


def job_error(job: JobSpec, loc: Tuple[str, ...], message: str) -> JobFileError:
    """A ``JobFileError`` at ``loc``'s line (or at its ``--set``)."""
    return JobFileError.at(job, loc, message)


def describe(row: Instance) -> str:
    net = row.network_label() if row.fast_network else "no fast network"
    return f"{row.instance_type} ({row.accelerator_label()}, {net})" if row.accelerator \
        else f"{row.instance_type} (no accelerator)"


# What ``once`` found, per job object (by identity: the frozen JobSpec carries no provider's
# results, and a copy of a job, which may differ, chooses again); dropped with the job.
_found: Dict[int, Tuple["weakref.ref[JobSpec]", Dict[tuple, Any]]] = {}
_found_lock = threading.Lock()


def once(job: JobSpec, key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()`` the first time ``key`` is asked for this job object, then what it gave (so
    a choice's warning is said once however often render, the estimate and the ledger ask)."""
    with _found_lock:
        entry = _found.get(id(job))
        if entry is None or entry[0]() is not job:
            ref = weakref.ref(job, functools.partial(_forget, id(job)))
            entry = _found[id(job)] = (ref, {})
    results = entry[1]
    if key not in results:
        results[key] = compute()
    return results[key]


def _forget(ident: int, dead: "weakref.ref[JobSpec]") -> None:
    with _found_lock:
        if ident in _found and _found[ident][0] is dead:
            del _found[ident]


def choose(job: JobSpec, rules: InstanceRules, option: Optional[str]) -> Optional[Choice]:
    """The instance type for ``job`` (None: no GPUs asked for and none named: the provider's default).
    Chosen once per job and provider (its warning is said once)."""
    return once(job, (rules.provider, option), lambda: _choose(job, rules, option))


def _choose(job: JobSpec, rules: InstanceRules, option: Optional[str]) -> Optional[Choice]:
    r = job.resources
    if option:
        return _named(job, rules, rules.to_own(option), ("providers", rules.provider, rules.option))
    if r.instance_type:
        own = rules.to_own(r.instance_type)
        if rules.catalog().get(own) is not None or rules.owns(own):
            return _named(job, rules, own, ("resources", "instance_type"))
        return _translated(job, rules, r.instance_type)
    if r.accelerator:
        best = _resolved(job, rules, [r.accelerator], r.gpus_per_node)
        return Choice(best.instance_type, best)
    if r.gpus_per_node and rules.defaults:
        best = _resolved(job, rules, list(rules.defaults), r.gpus_per_node, default=True)
        warnings.warn(f"resources.gpus_per_node is {r.gpus_per_node} without resources.accelerator: "
                      f"{rules.provider} uses {describe(best)}, its default for that count; set "
                      "resources.accelerator to choose (cloudtrain resources lists them)", CloudtrainWarning,
                      stacklevel=3)
        return Choice(best.instance_type, best)
    return None


def _named(job: JobSpec, rules: InstanceRules, name: str, loc: Tuple[str, ...]) -> Choice:
    row = rules.catalog().get(name)
    if row is None:
        if loc[0] == "resources" or rules.owns(name):
            _warn_if_unlisted(job, rules, name, loc)
            return Choice(name, None)
        raise job_error(job, loc, f"{name!r} is not a {rules.provider} {rules.noun} (not in its catalog); "
                                  f"cloudtrain resources -p {rules.provider} lists them")
    if row.retired:  # named: the user's call (a cluster made before may still run it); never picked
        warnings.warn(f"{'.'.join(loc)}: {row.instance_type} was retired by the platform on {row.retired} "
                      f"({row.retired_source or 'see its catalog row'}); new capacity of it is refused there: "
                      f"choose another (cloudtrain resources -p {rules.provider}"
                      f"{' --accelerator ' + row.accelerator if row.accelerator else ''})", CloudtrainWarning,
                      stacklevel=3)
    _warn_if_not_offered(job, rules, row)
    r = job.resources
    if r.gpus_per_node and row.count != r.gpus_per_node:
        raise job_error(job, loc, f"{row.instance_type} has {row.count or 'no'} accelerator(s) "
                                  f"({row.accelerator_label()}), but resources.gpus_per_node is {r.gpus_per_node}; "
                                  f"make them agree, or drop {'.'.join(loc)} and let resources.accelerator choose")
    if r.accelerator and row.accelerator != r.accelerator:
        raise job_error(job, loc, f"{row.instance_type} has {row.accelerator or 'no accelerator'}, but "
                                  f"resources.accelerator is {r.accelerator}; make them agree, or drop one")
    if job.network.rdma == "on" and not row.fast_network:
        raise _no_network(job, rules, row)
    return Choice(row.instance_type, row)


def _warn_if_unlisted(job: JobSpec, rules: InstanceRules, name: str, loc: Tuple[str, ...]) -> None:
    """A named type the catalog does not list is sent as written (the catalog is a snapshot; the
    platform may have a newer type), but said at its line: a misspelt or made-up type is refused
    only at submit, and has no price (issue 44 item 6).  Not said for a job that asks for no GPU
    on a provider whose catalog lists GPU types only (sagemaker, ec2, azure, modelarts: its CPU
    types are not in it, so a CPU type's absence says nothing)."""
    catalog, r = rules.catalog(), job.resources
    if not (r.accelerator or r.gpus_per_node or any(not row.accelerator for row in catalog.rows)):
        return
    dated = f" (a snapshot of {catalog.date})" if catalog.date else ""
    warnings.warn(CloudtrainWarning(str(job_error(
        job, loc, f"{name} is not in {rules.provider}'s catalog of {rules.noun}s{dated}: the platform refuses it at "
                  f"submit unless it is newer than the catalog, and the job has no cost estimate; check the spelling "
                  f"(cloudtrain resources -p {rules.provider} lists them), or read the platform's current list "
                  f"(cloudtrain catalog refresh -p {rules.provider})"))), stacklevel=4)


def _translated(job: JobSpec, rules: InstanceRules, name: str) -> Choice:
    """``resources.instance_type`` names another platform's type: resolve its accelerator here."""
    other = find_elsewhere(name, rules.provider)
    accelerator = other[1].accelerator if other is not None else None
    if other is None or not accelerator:
        raise job_error(job, ("resources", "instance_type"),
                        f"{name!r} is not a {rules.provider} {rules.noun} and no installed catalog knows it; set "
                        f"providers.{rules.provider}.{rules.option}, or resources.accelerator and gpus_per_node")
    provider, row = other
    if job.resources.gpus_per_node and job.resources.gpus_per_node != row.count:
        raise job_error(job, ("resources", "instance_type"),
                        f"{name} ({provider}) has {row.accelerator_label()}, but resources.gpus_per_node is "
                        f"{job.resources.gpus_per_node}; make them agree")
    best = _resolved(job, rules, [accelerator], row.count)
    warnings.warn(f"resources.instance_type {name} is {provider}'s; {rules.provider} runs its "
                  f"{row.accelerator_label()} on {describe(best)}; set resources.accelerator instead to say "
                  "it once for every provider", CloudtrainWarning, stacklevel=3)
    return Choice(best.instance_type, best)


def find_elsewhere(name: str, me: str) -> Optional[Tuple[str, Instance]]:
    """(provider, row) of the first other installed provider whose catalog lists ``name``."""
    from ..extend.plugins import providers
    for pname, info in sorted(providers().items()):
        if pname == me:
            continue
        try:
            rules = info.cls.instance_rules()
        except Exception:  # a third-party provider that fails to import: not this question's business
            continue
        if rules is None:
            continue
        row = rules.catalog().get(rules.to_own(name))
        if row is not None:
            return pname, row
    return None


def wanted(job: JobSpec, rules: InstanceRules) -> Optional[Tuple[str, int]]:
    """(accelerator, count per node) the job asks for, for a platform mode that takes them
    without an instance type (a TI-ONE resource group, a ModelArts dedicated pool):
    ``resources.accelerator`` x ``gpus_per_node``, or the row that ``resources.instance_type``
    names in this platform's catalog or in another provider's (exit 2 when none knows it).
    None: no accelerator named."""
    r = job.resources
    if r.instance_type:
        row = rules.catalog().get(rules.to_own(r.instance_type))
        other = ("", row) if row is not None else find_elsewhere(r.instance_type, rules.provider)
        accelerator = other[1].accelerator if other is not None else None
        if other is None or not accelerator:
            raise job_error(job, ("resources", "instance_type"),
                            f"{r.instance_type!r} names no GPU instance that an installed catalog knows, and "
                            f"{rules.provider} does not send it as written; set resources.accelerator and "
                            "gpus_per_node instead")
        row = other[1]
        if r.gpus_per_node and r.gpus_per_node != row.count:
            raise job_error(job, ("resources", "instance_type"),
                            f"{r.instance_type} has {row.accelerator_label()}, but resources.gpus_per_node is "
                            f"{r.gpus_per_node}; make them agree")
        if r.accelerator and r.accelerator != accelerator:
            raise job_error(job, ("resources", "instance_type"),
                            f"{r.instance_type} has {accelerator}, but resources.accelerator is {r.accelerator}; "
                            "make them agree, or drop one")
        return accelerator, row.count
    if r.accelerator:
        return r.accelerator, r.gpus_per_node
    return None


def _warn_if_not_offered(job: JobSpec, rules: InstanceRules, row: Instance) -> None:
    region = rules.region(job)
    if row.offered_in(region) is False:
        warnings.warn(f"{row.instance_type} is not offered in {region} by {rules.provider}'s catalog "
                      f"({_where(row)}); the platform may refuse it there (cloudtrain catalog refresh -p "
                      f"{rules.provider} updates the catalog)", CloudtrainWarning, stacklevel=4)


def _where(row: Instance) -> str:
    shown = ", ".join(row.regions[:6]) + (", ..." if len(row.regions) > 6 else "")
    return f"it lists {shown}" if row.regions else "it lists no regions"


def _in_region(job: JobSpec, rules: InstanceRules, rows: List[Instance], accelerator: str,
               count: int) -> List[Instance]:
    """``rows`` offered in the job's region (all of them when the region or the rows' regions are
    unknown); exit 2 naming where they are offered when none is offered there."""
    region = rules.region(job)
    here = [row for row in rows if row.offered_in(region) is not False]
    if rows and not here:
        where = sorted({reg for row in rows for reg in row.regions})
        raise job_error(job, ("resources", "accelerator"),
                        f"{rules.provider} offers no {accelerator} x {count} in {region} (its catalog lists "
                        f"{', '.join(row.instance_type for row in rows)} in {', '.join(where)}); choose one of "
                        f"those regions, or another accelerator (cloudtrain resources -p {rules.provider} "
                        f"--accelerator {accelerator} --region {region})")
    return here


def _resolved(job: JobSpec, rules: InstanceRules, accelerators: List[str], count: int,
              default: bool = False) -> Instance:
    """The row that ``accelerators`` x ``count`` resolve to (rules 3-5); exit 2 when none fits."""
    r, catalog = job.resources, rules.catalog()
    rdma = job.network.rdma == "on"
    for accelerator in accelerators:
        exact = catalog.select(accelerator, count)
        if default:
            exact = [row for row in exact if row.offered_in(rules.region(job)) is not False]
        else:
            exact = _in_region(job, rules, exact, accelerator, count)
        fit = [row for row in exact if row.fits(r.cpus_per_node, r.memory_gb)]
        fast = [row for row in fit if row.fast_network]
        pick = fast if rdma else fit
        if pick:
            return smallest(pick)
        if default:
            continue
        if not exact:
            raise _no_count(job, rules, catalog, accelerator, count)
        if not fit:
            biggest = max(exact, key=Instance.size_key)
            loc = ("resources", "cpus_per_node" if r.cpus_per_node and (biggest.vcpus or 0) < r.cpus_per_node
                   else "memory_gb")
            raise job_error(job, loc, f"no {rules.provider} {rules.noun} with {accelerator} x {count} has "
                                      f"{_minimums(r)}; the largest is {biggest.instance_type} "
                                      f"({biggest.vcpus:g} vCPUs, {biggest.memory_gb:g} GiB); lower the minimum")
        raise _no_network(job, rules, min(fit, key=Instance.size_key))
    offered = ", ".join(f"{a} x {'/'.join(map(str, catalog.counts(a)))}" for a in accelerators if catalog.counts(a))
    raise job_error(job, ("resources", "gpus_per_node"),
                    f"{rules.provider} has no default instance with {count} GPUs{' and a fast network' if rdma else ''}"
                    f" (its defaults: {offered or ', '.join(accelerators) or 'none'}); set resources.accelerator and a "
                    f"count it offers (cloudtrain resources -p {rules.provider} --gpus {count})")


def _minimums(r) -> str:
    parts = ([f"{r.cpus_per_node:g} vCPUs"] if r.cpus_per_node else []) + \
            ([f"{r.memory_gb:g} GiB"] if r.memory_gb else [])
    return " and ".join(parts)


def _no_count(job: JobSpec, rules: InstanceRules, catalog: Catalog, accelerator: str, count: int) -> JobFileError:
    counts = catalog.counts(accelerator)
    if not counts:
        offered = ", ".join(catalog.accelerators()) or "none"
        return job_error(job, ("resources", "accelerator"),
                         f"{rules.provider} offers no {accelerator} (its catalog has: {offered}); choose one of "
                         f"those, or another provider (cloudtrain resources --accelerator {accelerator})"
                         + _hint(rules))
    return job_error(job, ("resources", "gpus_per_node"),
                     f"{rules.provider} has no {rules.noun} with {count} x {accelerator}; it has "
                     f"{' or '.join(map(str, counts))} per node; set gpus_per_node to one of those "
                     f"(cloudtrain resources -p {rules.provider} --accelerator {accelerator})"
                     + _hint(rules))


def _hint(rules: InstanceRules) -> str:
    text = rules.hint()
    return f"; {text}" if text else ""


def nearest_with_network(rows: Iterable[Instance], want: Instance) -> Optional[Instance]:
    """The instance with a fast network closest to ``want``: same accelerator, then the nearest
    count, then the smallest."""
    fast = [r for r in rows if r.fast_network and r.accelerator and not r.retired]
    if not fast:
        return None
    return min(fast, key=lambda r: (r.accelerator != want.accelerator, abs(r.count - want.count), r.size_key()))


def _no_network(job: JobSpec, rules: InstanceRules, row: Instance) -> JobFileError:
    near = nearest_with_network(rules.catalog().rows, row)
    fix = (f"use {describe(near)} (providers.{rules.provider}.{rules.option}, or resources.accelerator and "
           f"gpus_per_node), or set network.rdma: auto") if near else "set network.rdma: auto"
    return job_error(job, ("network", "rdma"),
                     f"is on, but {row.instance_type} ({row.accelerator_label()}) has no fast network (EFA, "
                     f"InfiniBand or RoCE); {fix}")


def smallest_cpu(job: JobSpec, rules: InstanceRules) -> Optional[Choice]:
    """A job that asks for no accelerator (no ``accelerator``, ``gpus_per_node`` or
    ``instance_type``): the catalog's smallest CPU-only type with at least ``cpus_per_node``
    vCPUs and ``memory_gb`` GiB, as SageMaker and EC2 pick one without a setting.  None: the job
    asks for an accelerator, or the catalog lists no CPU-only type; exit 2 when none is big enough."""
    r = job.resources
    if r.accelerator or r.gpus_per_node or r.instance_type:
        return None
    rows = [row for row in rules.catalog().rows if not row.accelerator]
    if not rows:
        return None
    fit = [row for row in rows if row.fits(r.cpus_per_node, r.memory_gb)]
    if not fit:
        biggest = max(rows, key=lambda row: (row.vcpus or 0, row.memory_gb or 0))
        loc = ("resources", "cpus_per_node" if r.cpus_per_node and (biggest.vcpus or 0) < r.cpus_per_node
               else "memory_gb")
        raise job_error(job, loc, f"no {rules.provider} {rules.noun} without accelerators has {_minimums(r)}; the "
                                  f"largest is {biggest.instance_type} ({biggest.vcpus or 0:g} vCPUs, "
                                  f"{biggest.memory_gb or 0:g} GiB); lower the minimum, or set "
                                  f"providers.{rules.provider}.{rules.option}")
    best = min(fit, key=Instance.size_key)
    return Choice(best.instance_type, best)


def check_minimums(job: JobSpec, rules: InstanceRules, choice: Optional[Choice], loc: Tuple[str, ...]) -> None:
    """A type named at ``loc`` (a setting, maybe the account's) with fewer vCPUs or less memory
    than ``resources`` asks for: exit 2 naming both (nothing is sent that contradicts the job)."""
    r, row = job.resources, (choice.row if choice else None)
    if row is None or row.fits(r.cpus_per_node, r.memory_gb):
        return
    raise job_error(job, loc, f"{row.instance_type} has {row.vcpus or 0:g} vCPUs and {row.memory_gb or 0:g} GiB, but "
                              f"the job asks for {_minimums(r)} (resources); make them agree, or drop "
                              f"{'.'.join(loc)} and let resources choose")


def cpu_default(job: JobSpec, rules: InstanceRules, default: Instance) -> Choice:
    """A job that asks for no accelerator and names no type: ``smallest_cpu`` when the catalog
    lists CPU-only types, else ``default``, the provider's own type for such a job (its vCPUs
    and memory given with it); exit 2 when the job's ``cpus_per_node``/``memory_gb`` need more
    than it has: a catalog without CPU-only rows has nothing bigger to choose, and a minimum is
    never dropped in silence (issue 28 item 5)."""
    found = smallest_cpu(job, rules)
    if found is not None:
        return found
    r = job.resources
    if not default.fits(r.cpus_per_node, r.memory_gb):
        loc = ("resources", "cpus_per_node" if r.cpus_per_node and (default.vcpus or 0) < r.cpus_per_node
               else "memory_gb")
        raise job_error(job, loc, f"the job asks for {_minimums(r)}, more than {default.instance_type} "
                                  f"({default.vcpus or 0:g} vCPUs, {default.memory_gb or 0:g} GiB), {rules.provider}'s "
                                  "type for a job without accelerators; its catalog lists no CPU-only type to choose "
                                  f"a bigger one from: set providers.{rules.provider}.{rules.option} "
                                  "to one that has them")
    return Choice(default.instance_type, None)
