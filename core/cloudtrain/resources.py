"""``cloudtrain resources``: every catalog row that matches, across the installed providers
(like ``sky show-gpus``), and ``--refresh``, which rebuilds one provider's catalog from its
platform's API."""
from __future__ import annotations

import importlib
import json
from typing import List, Optional, Tuple

from .catalog import Instance
from .errors import BadInput


def matching(accelerator: Optional[str] = None, gpus: Optional[int] = None,
             provider: Optional[str] = None) -> List[Tuple[str, Instance]]:
    """(provider, row) for every catalog row with ``accelerator`` x ``gpus`` (None: any)."""
    from .accelerators import canonical
    from .plugins import providers
    if accelerator is not None:
        try:
            accelerator = canonical(accelerator)
        except ValueError as exc:
            raise BadInput(f"--accelerator: {exc}") from None
    infos = providers()
    if provider is not None and provider not in infos:
        raise BadInput(f"unknown provider {provider!r}; cloudtrain providers lists them")
    out = []
    for name, info in sorted(infos.items()):
        if provider not in (None, name):
            continue
        rules = info.cls.instance_rules()
        if rules is None:
            continue
        out += [(name, row) for row in rules.catalog().select(accelerator, gpus) if row.accelerator]
    return out


def rows_json(found: List[Tuple[str, Instance]]) -> str:
    return json.dumps([{"provider": p, **row.to_dict(), "network": row.fast_network} for p, row in found], indent=2)


def rows_table(found: List[Tuple[str, Instance]]) -> List[tuple]:
    def num(v):
        return "-" if v is None else f"{v:g}"
    rows = [("PROVIDER", "INSTANCE_TYPE", "ACCELERATOR", "ACC_MEM_GB", "VCPUS", "MEMORY_GB", "NETWORK", "PRICE")]
    for p, r in sorted(found, key=lambda f: (f[1].accelerator or "", f[1].count, f[0], f[1].size_key())):
        rows.append((p, r.instance_type, r.accelerator_label(), num(r.accelerator_memory_gb), num(r.vcpus),
                     num(r.memory_gb), r.network_label(), num(r.price)))
    return rows


def refresh(provider: Optional[str], out_dir: Optional[str]) -> List[str]:
    """Rebuild ``provider``'s catalog through its platform's SDK; the files written."""
    from .plugins import get_provider_class
    if not provider:
        raise BadInput("--refresh needs -p PROVIDER, e.g. cloudtrain resources --refresh -p ec2")
    cls = get_provider_class(provider)
    if not cls.catalog_refresh:
        raise BadInput(f"{provider} has no catalog refresh; its catalog file is edited by hand (see its header)")
    module, _, attr = cls.catalog_refresh.partition(":")
    for sdk in cls.sdk_modules:
        cls.require_sdk(sdk)
    fn = getattr(importlib.import_module(module), attr)
    return fn(out_dir=out_dir) if out_dir else fn()
