"""TI-ONE's postpaid specs (``catalogs/tione.json``), how a job's accelerator becomes a spec or a
resource group's ``GpuType``, and the refresh through ``DescribeBillingSpecs``.

Two resource modes (``ResourceConfigInfo``, SDK ``tencentcloud.tione.v20211111.models``):

- postpaid (``ChargeType: POSTPAID_BY_HOUR``): ``InstanceType`` is a spec id such as
  ``TI.GN10.20XLARGE320.POST`` (72C320G, V100 x 8).  The shipped catalog holds the specs the SDK's
  ``ResourceConfigInfo.InstanceType`` docstring lists, nothing else: no A100 spec is public there,
  so ``A100`` x 8 postpaid is exit 2 naming the specs that exist and pointing at a resource group.
- a resource group (``ChargeType: PREPAID``): ``Cpu``/``Memory``/``Gpu``/``GpuType``; the neutral
  accelerator becomes ``GpuType`` by ``GPU_TYPES`` (the SDK's ``GpuDetail.Name``: "枚举值: V100 A100
  T4") and ``Gpu`` = count x 100 (1/100 card).

``cloudtrain resources --refresh -p tione [--out DIR]`` rebuilds the file from ``DescribeBillingSpecs``
(ChargeType POSTPAID_BY_HOUR, TaskType TRAIN): a spec's ``SpecName`` is the id that ``InstanceType``
and ``DescribeBillingSpecsPrice`` take, its ``GpuType`` the card, and its ``SpecAlias`` ("32C128G
T4*1", the form of the SDK's ``InstanceTypeAlias`` list) the cores, memory and cards.
"""
from __future__ import annotations

import datetime
import os
import re
from typing import Iterable, List, Optional

from cloudtrain.catalogs import catalog as cat
from cloudtrain.catalogs.catalog import Catalog, Instance, load, package_file
from cloudtrain.catalogs.instances import InstanceRules

CATALOG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogs")
SPEC_ID = re.compile(r"^TI\.[A-Z0-9]+(\.[A-Z0-9]+)+$")
# neutral accelerator -> TI-ONE's GpuType.  Only the names TI-ONE documents (SDK GpuDetail.Name:
# "GPU 显卡类型；枚举值: V100 A100 T4"); an 80 GB A100 or a 32 GB V100 has no documented GpuType
# of its own, so those need providers.tione.gpu_type.
# H800 and A800: the resource-group card types ResourceConf.GpuType names ("卡类型，参考资源组上对应的
# 卡类型。eg: H800,A800,A100,T4,P4,V100等", tencentcloud-sdk-python-tione 3.1.191 models.py).
GPU_TYPES = {"A100": "A100", "V100": "V100", "T4": "T4", "H800": "H800", "A800": "A800"}
# TI-ONE's card names (DescribeBillingSpecs Spec.GpuType, the alias) -> the neutral name
NEUTRAL = {"V100": "V100", "A100": "A100", "T4": "T4", "H800": "H800", "A800": "A800"}
ALIAS = re.compile(r"^\s*(?P<cpu>\d+)C(?P<mem>\d+)G(?:\s+(?P<gpu>[A-Za-z0-9-]+)\*(?P<n>\d+))?\s*$")
SOURCE = ("DescribeBillingSpecs (API 2021-11-11, ChargeType POSTPAID_BY_HOUR, TaskType TRAIN) through "
          "tencentcloud-sdk-python-tione, by cloudtrain_tione.catalog: SpecName = InstanceType, "
          "SpecAlias '<cores>C<memory>G <card>*<n>' as in the SDK's InstanceTypeAlias list")
NOTES = ("price: CNY per hour from DescribeBillingSpecsPrice (TotalCost in fen for SpecCount 1, the list price "
         "before the account's discounts). A100 has no public postpaid spec: use a resource group (GpuType A100, "
         "SDK GpuDetail.Name).")
PRICE_SOURCE = ("DescribeBillingSpecsPrice (API 2021-11-11) through tencentcloud-sdk-python-tione, by "
                "cloudtrain_tione.catalog: SpecsPrice[].TotalCost (fen, the list price) for SpecCount 1 of a "
                "POSTPAID_BY_HOUR spec, read as CNY per hour, for the region the call was made in")


def tione_catalog() -> Catalog:
    return load(package_file(__file__, "tione.json"))


def resource_group_hint() -> str:
    """What a postpaid user can have instead: the GPU specs that exist, and a resource group."""
    rows = sorted(tione_catalog().rows, key=lambda r: (r.accelerator or "", r.count))
    specs = ", ".join(f"{r.instance_type} ({r.accelerator_label()})" for r in rows if r.accelerator)
    return (f"TI-ONE's postpaid GPU specs are {specs or 'none'}; for another card use a resource group: set "
            "providers.tione.resource_group (its nodes get GpuType and Gpu = gpus_per_node x 100)")


RULES = InstanceRules("tione", tione_catalog, owns=lambda n: bool(SPEC_ID.match(n)), noun="postpaid spec",
                      hint=resource_group_hint)


def gpu_type(accelerator: str) -> Optional[str]:
    """TI-ONE's ``GpuType`` for a neutral accelerator (None: not a documented GpuType)."""
    return GPU_TYPES.get(accelerator)


# -- refresh -----------------------------------------------------------------------------------
def row_of(spec: dict) -> Optional[Instance]:
    """One ``DescribeBillingSpecs`` Spec as a catalog row (None: not a spec id, or an alias that
    does not say its cores and memory)."""
    name = spec.get("SpecName") or ""
    m = ALIAS.match(spec.get("SpecAlias") or "")
    if not SPEC_ID.match(name) or not m:
        return None
    card = spec.get("GpuType") or m.group("gpu")
    count = int(m.group("n") or 0)
    accelerator = NEUTRAL.get(card or "") if count else None
    if count and accelerator is None:
        return None  # a card with no neutral name (cloudtrain.spec.accelerators)
    return Instance(instance_type=name, accelerator=accelerator, count=count if accelerator else 0,
                    vcpus=int(m.group("cpu")), memory_gb=int(m.group("mem")),
                    regions=tuple(sorted(spec.get("AvailableRegion") or ())))


def fetch(client) -> List[Instance]:
    from tencentcloud.tione.v20211111 import models
    request = models.DescribeBillingSpecsRequest()
    request._deserialize({"ChargeType": "POSTPAID_BY_HOUR", "TaskType": "TRAIN"})
    response = client.DescribeBillingSpecs(request)
    return [row for row in (row_of(s._serialize()) for s in (response.Specs or [])) if row is not None]


def priced(client, rows: List[Instance], date: str, region: str) -> List[Instance]:
    """``rows`` with TI-ONE's list price per hour (``DescribeBillingSpecsPrice``, one batch); a
    spec the answer leaves out, or prices at 0 (the API's "over 4.2 billion" value), says so."""
    from dataclasses import replace
    from tencentcloud.tione.v20211111 import models
    from cloudtrain.catalogs.catalog import Price
    request = models.DescribeBillingSpecsPriceRequest()
    request._deserialize({"SpecsParam": [{"SpecName": r.instance_type, "SpecCount": 1} for r in rows]})
    answer = client.DescribeBillingSpecsPrice(request)
    fen = {p.SpecName: p.TotalCost for p in (answer.SpecsPrice or []) if p.SpecName}
    out = []
    for row in rows:
        cost = fen.get(row.instance_type)
        if not cost:
            out.append(replace(row, price_note="DescribeBillingSpecsPrice gave no price for it"))
            continue
        rate = round(cost / 100.0, 2)
        out.append(replace(row, prices=(Price(region, rate, None),), price=rate, currency="CNY", price_date=date,
                           price_source=PRICE_SOURCE, price_note="no spot: TI-ONE postpaid specs have no spot price"))
    return out


def write(rows: Iterable[Instance], out_dir: str, date: Optional[str] = None, via: str = "") -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tione.json")
    cat.write_text(path, cat.dump("tione", rows, date=date or datetime.date.today().isoformat(), source=SOURCE + via,
                                  notes=NOTES))
    return path


def refresh(client=None, region: Optional[str] = None, out_dir: str = CATALOG_DIR) -> List[str]:
    """``tione.json`` from the account's DescribeBillingSpecs (TI-ONE's default credentials;
    ``CLOUDTRAIN_TIONE_ENDPOINT`` as for the provider)."""
    from cloudtrain.spec.errors import PlatformError
    from .sdk import TioneApi, api_error, require_sdk
    region = region or os.environ.get("TENCENTCLOUD_REGION") or "ap-shanghai"
    if client is None:
        client = TioneApi(require_sdk).client(region)
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    try:
        rows = fetch(client)
    except TencentCloudSDKException as exc:
        raise api_error(exc, "DescribeBillingSpecs") from None
    if not rows:
        raise PlatformError("DescribeBillingSpecs listed no training spec with cores, memory and a known card; "
                            "the catalog is left as it was (check the region)")
    try:
        rows = priced(client, rows, datetime.date.today().isoformat(), region)
    except TencentCloudSDKException as exc:  # the specs are still worth keeping: say why there is no price
        from dataclasses import replace
        why = f"DescribeBillingSpecsPrice failed ({exc.get_code()}); no price"
        rows = [replace(r, price_note=why) for r in rows]
    return [write(rows, out_dir)]

