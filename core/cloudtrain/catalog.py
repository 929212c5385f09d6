"""Instance catalogs: what each platform's instance types carry, read from a plugin's data file.

A catalog file is JSON shipped inside the plugin package::

    {"catalog": "ec2", "date": "2026-11-23", "source": "...", "notes": "...",
     "rows": [{"instance_type": "p4d.24xlarge", "accelerator": "A100", "count": 8,
               "accelerator_memory_gb": 40, "vcpus": 96, "memory_gb": 1152,
               "efa": 4, "efa_rdma_read": true, "infiniband": false, "roce": false,
               "regions": ["us-east-1", ...], "price": null}, ...]}

Files are read lazily, once per process, and only by the provider that renders (or by
``cloudtrain resources``): render's cold start pays for one small file, not for all of them.
Standard library only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, List, Optional, Tuple


@dataclass(frozen=True)
class Instance:
    """One instance type (or spec, flavor, VM size) of a platform."""

    instance_type: str
    accelerator: Optional[str] = None     # a neutral name (cloudtrain.accelerators), None for CPU only
    count: int = 0                        # accelerators per instance
    accelerator_memory_gb: Optional[float] = None
    vcpus: Optional[float] = None
    memory_gb: Optional[float] = None
    efa: int = 0                          # EFA devices (EC2 NetworkInfo.EfaInfo.MaximumEfaInterfaces)
    efa_rdma_read: bool = False           # the EFA device does RDMA read (FI_EFA_USE_DEVICE_RDMA=1 is safe)
    infiniband: bool = False
    roce: bool = False                    # RoCE (TI-ONE HCC, ModelArts RoCE)
    regions: Tuple[str, ...] = ()
    price: Optional[float] = None         # on-demand per hour (USD unless the file says otherwise)
    source: Optional[str] = None          # the row's own source, when the file's is not enough

    @property
    def fast_network(self) -> Optional[str]:
        """``efa``, ``infiniband``, ``roce`` or None."""
        if self.efa:
            return "efa"
        if self.infiniband:
            return "infiniband"
        if self.roce:
            return "roce"
        return None

    def network_label(self) -> str:
        if self.efa:
            return f"EFA x{self.efa}" + (" (RDMA read)" if self.efa_rdma_read else "")
        return {"infiniband": "InfiniBand", "roce": "RoCE"}.get(self.fast_network or "", "-")

    def accelerator_label(self) -> str:
        return f"{self.accelerator} x {self.count}" if self.accelerator else "-"

    def fits(self, cpus: Optional[float], memory_gb: Optional[float]) -> bool:
        return ((cpus is None or (self.vcpus or 0) >= cpus)
                and (memory_gb is None or (self.memory_gb or 0) >= memory_gb))

    def size_key(self) -> tuple:
        """Smallest first: price when known, then vCPUs, memory, name."""
        return (self.price if self.price is not None else float("inf"), self.vcpus or 0, self.memory_gb or 0,
                self.instance_type)

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["regions"] = list(self.regions)
        return out


@dataclass
class Catalog:
    """A platform's instance types, as one data file lists them."""

    name: str
    rows: List[Instance]
    date: Optional[str] = None
    source: Optional[str] = None
    notes: Optional[str] = None
    _index: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self._index = {r.instance_type.lower(): r for r in self.rows}

    def get(self, instance_type: str) -> Optional[Instance]:
        return self._index.get(instance_type.strip().lower())

    def select(self, accelerator: Optional[str] = None, count: Optional[int] = None) -> List[Instance]:
        return [r for r in self.rows
                if (accelerator is None or r.accelerator == accelerator) and (count is None or r.count == count)]

    def counts(self, accelerator: str) -> List[int]:
        return sorted({r.count for r in self.rows if r.accelerator == accelerator})

    def accelerators(self) -> List[str]:
        return sorted({r.accelerator for r in self.rows if r.accelerator})


def parse(data: dict) -> Catalog:
    known = set(Instance.__dataclass_fields__)
    rows = []
    for row in data.get("rows", []):
        values = {k: v for k, v in row.items() if k in known}
        values["regions"] = tuple(values.get("regions") or ())
        rows.append(Instance(**values))
    return Catalog(data.get("catalog", "?"), rows, data.get("date"), data.get("source"), data.get("notes"))


@lru_cache(maxsize=None)
def load(path: str) -> Catalog:
    """The catalog in ``path`` (read once per process)."""
    with open(path, encoding="utf-8") as f:
        return parse(json.load(f))


def package_file(module_file: str, name: str) -> str:
    """``catalogs/<name>`` next to a plugin module (``__file__``)."""
    return str(Path(module_file).resolve().parent / "catalogs" / name)


def dump(catalog_name: str, rows: Iterable[Instance], *, date: str, source: str, notes: str = "") -> str:
    """A catalog file's text: one row per line, so a refresh shows as a readable diff."""
    head = {"catalog": catalog_name, "date": date, "source": source, "notes": notes}
    lines = [json.dumps(_compact(r), ensure_ascii=False) for r in sorted(rows, key=lambda r: r.instance_type)]
    body = ",\n  ".join(lines)
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    return text + ',\n "rows": [\n  ' + body + "\n ]\n}\n"


def _compact(row: Instance) -> dict:
    out = {}
    for key, default in (("instance_type", None), ("accelerator", None), ("count", 0),
                         ("accelerator_memory_gb", None), ("vcpus", None), ("memory_gb", None), ("efa", 0),
                         ("efa_rdma_read", False), ("infiniband", False), ("roce", False), ("regions", ()),
                         ("price", None), ("source", None)):
        value = getattr(row, key)
        if key in ("instance_type", "accelerator", "count", "price") or value != default:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out
