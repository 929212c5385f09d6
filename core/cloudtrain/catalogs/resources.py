"""``cloudtrain resources``: every catalog row that matches, across the installed providers
(like ``sky show-gpus``), and ``--refresh``, which rebuilds one provider's catalog from its
platform's API."""
from __future__ import annotations

import json
from typing import List, Optional, Tuple

from .catalog import Instance
from ..spec.errors import BadInput


def matching(accelerator: Optional[str] = None, gpus: Optional[int] = None,
             provider: Optional[str] = None, region: Optional[str] = None,
             max_price: Optional[float] = None) -> List[Tuple[str, Instance]]:
    """(provider, row) for every catalog row with ``accelerator`` x ``gpus`` (None: any), offered
    in ``region`` when given (rows that list no regions are kept: unknown), and, with
    ``max_price``, an on-demand rate known and at most that (per instance-hour, in the row's
    currency).  CPU-only rows are in unless an accelerator or a GPU count is asked for.  Retired
    rows are left out."""
    from ..spec.accelerators import canonical
    from ..extend.plugins import providers
    if accelerator is not None:
        try:
            accelerator = canonical(accelerator)
        except ValueError as exc:
            raise BadInput(f"--accelerator: {exc}") from None
    infos = providers()
    if provider is not None and provider not in infos:
        raise BadInput(f"unknown provider {provider!r}; cloudtrain providers lists them")
    cpu_too = accelerator is None and not gpus  # CPU-only types (TI-ONE's TI.S.*) unless a GPU is asked for
    out = []
    for name, info in sorted(infos.items()):
        if provider not in (None, name):
            continue
        rules = info.cls.instance_rules()
        if rules is None:
            continue
        out += [(name, row) for row in rules.catalog().select(accelerator, gpus) if (row.accelerator or cpu_too)
                and row.offered_in(region) is not False
                and (max_price is None or (row.rate(region) is not None and row.rate(region) <= max_price))]
    return out


def by_price(found: List[Tuple[str, Instance]], region: Optional[str] = None) -> List[Tuple[str, Instance]]:
    """Cheapest first (per instance-hour; rows without a price last), then accelerator, count, provider,
    then the smallest (vCPUs, memory)."""
    def key(f):
        rate = f[1].rate(region)
        return (rate is None, rate or 0.0, f[1].accelerator or "", f[1].count, f[0], f[1].vcpus or 0,
                f[1].memory_gb or 0, f[1].instance_type)
    return sorted(found, key=key)


def rows_json(found: List[Tuple[str, Instance]], region: Optional[str] = None) -> str:
    return json.dumps([{"provider": p, **row.to_dict(), "network": row.fast_network,
                        "rate": row.rate(region), "spot_rate": row.rate(region, spot=True) if _has_spot(row, region)
                        else None, "rate_region": (row.price_in(region) or _NO).region}
                       for p, row in by_price(found, region)], indent=2)


class _NO:
    region = None


def _has_spot(row: Instance, region: Optional[str]) -> bool:
    found = row.price_in(region)
    return found is not None and found.spot is not None


def rows_table(found: List[Tuple[str, Instance]], region: Optional[str] = None) -> List[tuple]:
    """The table: PRICE is on-demand per instance-hour in ``region`` (else the cheapest region's,
    which REGION names), SPOT likewise; ``-`` where the catalog has none (its price_note says why)."""
    def num(v):
        return "-" if v is None else f"{v:g}"
    rows = [("PROVIDER", "INSTANCE_TYPE", "ACCELERATOR", "ACC_MEM_GB", "VCPUS", "MEMORY_GB", "NETWORK", "PRICE/H",
             "SPOT/H", "CURRENCY", "REGION")]
    for p, r in by_price(found, region):
        where = r.price_in(region)
        rows.append((p, r.instance_type, r.accelerator_label(), num(r.accelerator_memory_gb), num(r.vcpus),
                     num(r.memory_gb), r.network_label(), num(r.rate(region)),
                     num(where.spot if where else None), r.currency or "-" if where else "-",
                     (where.region if where else None) or "-"))
    return rows


def refresh(provider: Optional[str], out_dir: Optional[str]) -> List[str]:
    """Rebuild ``provider``'s catalog through its platform's SDK (or price API) into ``out_dir``
    (default: ``$CLOUDTRAIN_HOME/catalogs``); the files written.
    The refresh is the provider class's ``catalog_refresh`` (it needs the provider's SDK), else
    one its plugin registered (``cloudtrain_register_catalogs``: a price API without the SDK)."""
    from ..launch.platform import import_target
    from ..extend.plugins import catalog_refresher, get_provider_class
    if not provider:
        raise BadInput("--refresh needs -p PROVIDER, e.g. cloudtrain catalog refresh -p ec2")
    cls = get_provider_class(provider)
    target = cls.catalog_refresh or catalog_refresher(provider)
    if not target and cls.instance_rules() is None:
        raise BadInput(f"{provider} has no instance catalog (it runs where it is, at no listed price); "
                       "cloudtrain resources lists the providers that have one")
    if not target:
        raise BadInput(f"{provider} has no catalog refresh; its catalog file is edited by hand (see its header)")
    if not cls.catalog_refresh:
        return import_target(target)(out_dir=out_dir or _user_catalogs())
    for sdk in cls.sdk_modules:
        cls.require_sdk(sdk)
    # never the installed package's own files: everything cloudtrain writes is under $CLOUDTRAIN_HOME
    return import_target(target)(out_dir=out_dir or _user_catalogs())


def _user_catalogs() -> str:
    """``$CLOUDTRAIN_HOME/catalogs`` (private), where the providers read a refreshed catalog first."""
    from .catalog import user_dir
    from ..input.homedir import private_dir
    return str(private_dir(user_dir()))


def retired_matches(accelerator: Optional[str] = None, gpus: Optional[int] = None,
                    provider: Optional[str] = None) -> List[Tuple[str, Instance]]:
    """(provider, row) of the retired rows ``matching`` leaves out (to say why nothing matched)."""
    from ..spec.accelerators import canonical
    from ..extend.plugins import providers
    try:
        accelerator = canonical(accelerator) if accelerator else None
    except ValueError:
        return []
    out = []
    for name, info in sorted(providers().items()):
        rules = info.cls.instance_rules() if provider in (None, name) else None
        if rules is not None:
            out += [(name, r) for r in rules.catalog().select(accelerator, gpus, retired=True) if r.retired]
    return out
