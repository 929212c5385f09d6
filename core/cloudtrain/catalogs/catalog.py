"""Instance catalogs: what each platform's instance types carry, read from a plugin's data file.

A catalog file is JSON shipped inside the plugin package::

    {"catalog": "ec2", "date": "2026-11-23", "source": "...", "notes": "...",
     "rows": [{"instance_type": "p4d.24xlarge", "accelerator": "A100", "count": 8,
               "accelerator_memory_gb": 40, "vcpus": 96, "memory_gb": 1152,
               "efa": 4, "efa_rdma_read": true, "infiniband": false, "roce": false,
               "regions": ["us-east-1", ...], "price": null,
               "prices": {"us-east-1": {"on_demand": 21.96, "spot": 9.1}, ...}, "currency": "USD",
               "price_date": "2026-11-24", "price_source": "...", "price_note": null,
               "retired": null}, ...]}

``prices`` maps a region (``"*"``: every region alike, for a platform with one price list) to
its on-demand and spot rates per instance-hour; a row without any says why in ``price_note``.
``price`` is the lowest on-demand rate of ``prices`` (for sorting), kept for old files.
``retired``: the date the platform retired the type (with ``retired_source``); such a row is
listed for reference and never chosen.

A refreshed copy under ``$CLOUDTRAIN_HOME/catalogs/`` (``cloudtrain catalog refresh``)
replaces the shipped file of the same name.

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

ANY_REGION = "*"


@dataclass(frozen=True)
class Price:
    """One region's rates per instance-hour, in the row's currency (None: not published)."""

    region: str
    on_demand: Optional[float] = None
    spot: Optional[float] = None


@dataclass(frozen=True)
class Instance:
    """One instance type (or spec, flavor, VM size) of a platform."""

    instance_type: str
    accelerator: Optional[str] = None     # a neutral name (cloudtrain.spec.accelerators), None for CPU only
    count: int = 0                        # accelerators per instance
    accelerator_memory_gb: Optional[float] = None
    vcpus: Optional[float] = None
    memory_gb: Optional[float] = None
    efa: int = 0                          # EFA devices (EC2 NetworkInfo.EfaInfo.MaximumEfaInterfaces)
    efa_rdma_read: bool = False           # the EFA device does RDMA read (FI_EFA_USE_DEVICE_RDMA=1 is safe)
    infiniband: bool = False
    roce: bool = False                    # RoCE (TI-ONE HCC, ModelArts RoCE)
    regions: Tuple[str, ...] = ()
    price: Optional[float] = None         # the lowest on-demand rate of ``prices`` (sorting)
    source: Optional[str] = None          # the row's own source, when the file's is not enough
    prices: Tuple[Price, ...] = ()        # per region
    currency: Optional[str] = None        # USD, CNY
    price_date: Optional[str] = None      # when the prices were read from price_source
    price_source: Optional[str] = None
    price_note: Optional[str] = None      # why a rate is missing (no published price, ...)
    retired: Optional[str] = None         # the date the platform retired it: never chosen
    retired_source: Optional[str] = None

    def offered_in(self, region: Optional[str]) -> Optional[bool]:
        """Whether the catalog lists ``region`` for this type (None: it lists no regions, or no
        region was given)."""
        if not region or not self.regions:
            return None
        return region in self.regions

    def price_in(self, region: Optional[str]) -> Optional[Price]:
        """``region``'s rates; without a region, the cheapest region's (None: no price there)."""
        by_region = {p.region: p for p in self.prices}
        if region:
            return by_region.get(region) or by_region.get(ANY_REGION)
        priced = [p for p in self.prices if p.on_demand is not None]
        return min(priced, key=lambda p: p.on_demand or 0.0) if priced else (self.prices[0] if self.prices else None)

    def rate(self, region: Optional[str] = None, spot: bool = False) -> Optional[float]:
        """Per instance-hour in ``currency``: the spot rate when asked and published, else on-demand."""
        found = self.price_in(region)
        if found is None:
            return None
        return found.spot if spot and found.spot is not None else found.on_demand

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

    def spec_key(self) -> tuple:
        """Smallest first by vCPUs, memory, name (for rows not all priced)."""
        return (self.vcpus or 0, self.memory_gb or 0, self.instance_type)


    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["regions"] = list(self.regions)
        out["prices"] = {p.region: {"on_demand": p.on_demand, "spot": p.spot} for p in self.prices}
        return out


def smallest(rows: List["Instance"]) -> "Instance":
    """The cheapest of ``rows`` when every one has a price, else the smallest by vCPUs and memory:
    a snapshot that prices some rows only must not make a bigger, priced type look cheaper."""
    if all(r.price is not None for r in rows):
        return min(rows, key=Instance.size_key)
    return min(rows, key=Instance.spec_key)


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

    def select(self, accelerator: Optional[str] = None, count: Optional[int] = None,
               retired: bool = False) -> List[Instance]:
        """Rows with ``accelerator`` x ``count`` (None: any); retired ones only when asked."""
        return [r for r in self.rows
                if (accelerator is None or r.accelerator == accelerator) and (count is None or r.count == count)
                and (retired or not r.retired)]

    def counts(self, accelerator: str) -> List[int]:
        return sorted({r.count for r in self.select(accelerator)})

    def accelerators(self) -> List[str]:
        return sorted({r.accelerator for r in self.select() if r.accelerator})


def _spot(price: dict) -> Optional[float]:
    """A region's spot rate; one equal to its on-demand rate is a price list's placeholder where it read
    no spot price (skypilot-catalog's vms.csv gives SpotPrice = Price there), not a spot price."""
    spot = price.get("spot")
    return None if spot is not None and spot == price.get("on_demand") else spot


def parse(data: dict) -> Catalog:
    known = set(Instance.__dataclass_fields__)
    rows = []
    for row in data.get("rows", []):
        values = {k: v for k, v in row.items() if k in known}
        values["regions"] = tuple(values.get("regions") or ())
        values["prices"] = tuple(Price(region, p.get("on_demand"), _spot(p))
                                 for region, p in sorted((values.get("prices") or {}).items()))
        if values.get("price") is None:
            rates = [p.on_demand for p in values["prices"] if p.on_demand is not None]
            values["price"] = min(rates) if rates else None
        rows.append(Instance(**values))
    return Catalog(data.get("catalog", "?"), rows, data.get("date"), data.get("source"), data.get("notes"))


def user_dir() -> Path:
    """Where ``cloudtrain catalog refresh`` writes the user's copies."""
    from ..input.homedir import home
    return home() / "catalogs"


@lru_cache(maxsize=None)
def load(path: str) -> Catalog:
    """The catalog in ``path`` (read once per process); BadInput, one line naming the file, when
    it cannot be read or is not a catalog."""
    problem = unreadable(path)
    if problem is not None:
        from ..spec.errors import BadInput
        raise BadInput(f"catalog {path}: {problem}")
    return _parsed(path)


@lru_cache(maxsize=None)
def _read(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=None)
def _parsed(path: str) -> Catalog:
    return parse(_read(path))


@lru_cache(maxsize=None)
def unreadable(path: str) -> Optional[str]:
    """Why ``path`` is not a readable catalog (cut short, not JSON, rows of another shape), or None."""
    try:
        data = _read(path)
        if path.endswith(CATALOG_SUFFIX) and isinstance(data, dict) and "rows" in data:
            _parsed(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except ValueError as exc:
        return f"is not valid JSON ({exc}); was it cut short?"
    except (TypeError, KeyError, AttributeError) as exc:
        return f"is not a catalog ({type(exc).__name__}: {exc})"
    return None


CATALOG_SUFFIX = ".json"


def shipped_file(module_file: str, name: str) -> str:
    """``catalogs/<name>`` next to a plugin module (``__file__``): the snapshot the plugin ships."""
    return str(Path(module_file).resolve().parent / "catalogs" / name)


def package_file(module_file: str, name: str) -> str:
    """The catalog a provider reads: the user's refreshed copy (``$CLOUDTRAIN_HOME/catalogs/<name>``)
    when there is one and it reads, else the shipped snapshot.  A copy that does not read (cut
    short by a full disk, edited by hand) is named in a warning, once, and the shipped one is read."""
    mine = user_dir() / name
    if not mine.is_file():
        return shipped_file(module_file, name)
    problem = unreadable(str(mine))
    if problem is None:
        return str(mine)
    _warn_once(f"your catalog {mine} {problem}: using the one cloudtrain ships instead; "
               "`cloudtrain catalog refresh -p PROVIDER` writes it again (or remove it)")
    return shipped_file(module_file, name)


@lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    import warnings
    from ..spec.errors import CloudtrainWarning
    warnings.warn(CloudtrainWarning(message), stacklevel=3)


def write_text(path: str, text: str) -> str:
    """Write a catalog file whole or not at all: to a new file of the same directory, then renamed
    over ``path`` (a reader, or a refresh cut short, never leaves half a file).  Returns ``path``."""
    import os
    import tempfile
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=folder, prefix=".partial-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise
    for cached in (_read, _parsed, unreadable, load):
        cached.cache_clear()
    return path


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
                         ("price", None), ("source", None), ("prices", ()), ("currency", None),
                         ("price_date", None), ("price_source", None), ("price_note", None), ("retired", None),
                         ("retired_source", None)):
        value = getattr(row, key)
        if key in ("instance_type", "accelerator", "count", "price") or value != default:
            if key == "prices":
                value = {p.region: {"on_demand": p.on_demand, "spot": p.spot} for p in value}
            out[key] = list(value) if isinstance(value, tuple) else value
    return out
