"""Why a job's cost so far is missing (``-`` in ``cloudtrain list``, unpriced on the dashboard),
and how to get it: one line per provider, under the table.

A ledger row's cost is its rate x nodes x hours run; the rate is the catalog's, read when the
job was submitted (``orchestrate.ledger.rate_of``).  A row has none when:

- the provider has no instance catalog (kubeflow, volcano, slurm: the cluster's own machines,
  at no listed price); local and docker jobs run on this machine and are not mentioned;
- no instance type was resolved at submit (an Azure compute cluster's own VM size, a TI-ONE
  resource group, a ModelArts pool: the platform sizes the nodes);
- the catalog has the type but no price for it (the shipped snapshots price ec2 and azure in
  part, sagemaker, tione and modelarts not at all): ``cloudtrain catalog refresh -p PROVIDER``
  reads the platform's price list into ``$CLOUDTRAIN_HOME/catalogs``; jobs submitted after it
  have a cost.

A job that has not started has no cost yet, and is not a missing one.
"""
from __future__ import annotations

import functools
import time
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Optional, Tuple

def missing(found: Iterable, now: Optional[float] = None) -> Dict[str, str]:
    """``{provider: why its jobs' cost is missing and how to get it}`` for the ledger entries
    (``orchestrate.ledger.Entry``) in ``found`` that ran and have no cost."""
    now = now or time.time()
    types: Dict[str, Dict[Optional[str], int]] = defaultdict(lambda: defaultdict(int))
    for e in found:
        # a job of this machine's store (local, docker: ``local_state``) runs here: no price to miss
        if e.local or e.duration(now) is None or e.cost(now) is not None or _runs_here(e.provider):
            continue
        types[e.provider][e.instance_type] += 1
    return {provider: _why(provider, dict(counts)) for provider, counts in sorted(types.items())}


def lines(found: Iterable, now: Optional[float] = None) -> List[str]:
    """The footnote ``cloudtrain list`` prints under its table (empty when every cost is known)."""
    return [f"COST -: {why}" for why in missing(found, now).values()]


def _why(provider: str, counts: Dict[Optional[str], int]) -> str:
    jobs = sum(counts.values())
    what = f"{jobs} {provider} job{'s' if jobs != 1 else ''}"
    rules, refresh = _catalog(provider)
    if rules is None:
        return (f"{what}: {provider} has no instance catalog (the nodes are your cluster's own machines, "
                "at no price cloudtrain knows)" if refresh is not None
                else f"{what}: {provider}'s plugin is not installed here, so its catalog cannot be read "
                     "(cloudtrain providers)")
    named = sorted(t for t in counts if t)
    parts = []
    if named:
        shown = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
        catalog = rules.catalog()
        rows = [r for r in (catalog.get(t) for t in named) if r is not None]
        # the catalog's own word on its prices (a row's price_note), for a type it does not list too
        said = next((r.price_note for r in rows + catalog.rows if r.price_note), None)
        if rows:
            note = rows[0].price_note or ("priced in other regions only" if rows[0].prices else "no price")
        else:
            note = "not listed there" + (f"; its rows say: {said}" if said and "catalog refresh" not in said else "")
        parts.append(f"no price for {shown} in {provider}'s catalog ({note})")
        if refresh and "catalog refresh" not in note and (said is None or "catalog refresh" in said):
            parts.append(f"cloudtrain catalog refresh -p {provider} reads the platform's prices (its SDK and your "
                         "credentials); jobs submitted after it have a cost")
        elif not refresh:
            parts.append(f"{provider}'s catalog has no refresh: a copy of its file with prices in "
                         "$CLOUDTRAIN_HOME/catalogs is read first (docs/resources.md)")
        elif "catalog refresh" in note:
            parts.append("jobs submitted after a refresh have a cost")
    if None in counts:
        parts.append(f"{counts[None]} ran without an instance type (the platform sized the nodes: a compute "
                     f"cluster, resource group or pool), so no rate; providers.{provider}.{rules.option} "
                     "names one")
    return f"{what}: " + "; ".join(parts)


@functools.lru_cache(maxsize=None)
def _catalog(provider: str) -> Tuple[Any, Optional[bool]]:
    """(its ``InstanceRules`` or None, has a catalog refresh) of an installed provider;
    (None, None) for one not installed here."""
    from ..extend.plugins import catalog_refresher, get_provider_class
    try:
        cls = get_provider_class(provider)
        rules = cls.instance_rules()
    except Exception:  # noqa: BLE001 - a footnote never fails the listing
        return None, None
    return rules, bool(cls.catalog_refresh or catalog_refresher(provider))


@functools.lru_cache(maxsize=None)
def _runs_here(provider: str) -> bool:
    """The provider keeps its jobs in this machine's state store (``Provider.local_state``)."""
    from ..extend.plugins import get_provider_class
    try:
        return bool(get_provider_class(provider).local_state)
    except Exception:  # noqa: BLE001
        return False
