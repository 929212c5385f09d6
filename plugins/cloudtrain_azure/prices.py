"""Azure VM prices from Microsoft's public Retail Prices API (no SDK exists for it: plain HTTP).

``cloudtrain catalog refresh -p azure`` reads, for every size in the shipped catalog,
``GET https://prices.azure.com/api/retail/prices?$filter=serviceName eq 'Virtual Machines' and
armSkuName eq '<size>' and priceType eq 'Consumption'`` (learn.microsoft.com/rest/api/cost-management/
retail-prices/azure-retail-prices), following ``NextPageLink``, and keeps per ``armRegionName``
the Linux rate (a ``productName`` without "Windows") of the plain meter as on-demand and of the
" Spot" meter as spot; "Low Priority" meters are left out (an AmlCompute cluster of
low-priority nodes bills those, which this catalog does not hold: its spot column is the Spot
meter).  Azure ML bills a compute cluster's nodes at these VM rates.  Standard library only
(urllib); the API needs no credentials.
"""
from __future__ import annotations

import datetime
import json
import os
import urllib.parse
import urllib.request
from dataclasses import replace
from typing import Dict, Iterator, List, Optional, Tuple

from cloudtrain.catalogs import catalog as cat
from cloudtrain.catalogs.catalog import Instance, Price

API = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
SOURCE = "Azure Retail Prices API (prices.azure.com/api/retail/prices, Consumption, Linux), by cloudtrain_azure.prices"
SHIPPED = cat.shipped_file(__file__, "azure.json")


def items(size: str, base: str = API, timeout: float = 30) -> Iterator[dict]:
    """Every ``Items`` entry the API answers for ``size``, page after page."""
    query = {"api-version": API_VERSION, "$filter": f"serviceName eq 'Virtual Machines' and armSkuName eq "
                                                    f"'{size}' and priceType eq 'Consumption'"}
    url: Optional[str] = base + "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
    while url:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (https, or the test's loopback)
            page = json.load(resp)
        yield from page.get("Items") or []
        url = page.get("NextPageLink")


def rates(entries) -> Tuple[Dict[str, Tuple[Optional[float], Optional[float]]], Optional[str]]:
    """(region -> (on-demand, spot), currency) from the API's items."""
    out: Dict[str, List[Optional[float]]] = {}
    currency = None
    for it in entries:
        if "windows" in str(it.get("productName", "")).lower() or it.get("type") != "Consumption":
            continue
        sku = str(it.get("skuName", ""))
        if sku.endswith("Low Priority") or it.get("unitOfMeasure") != "1 Hour":
            continue
        region, price = it.get("armRegionName"), it.get("retailPrice")
        if not region or price is None:
            continue
        currency = it.get("currencyCode") or currency
        slot = out.setdefault(region, [None, None])
        index = 1 if sku.endswith("Spot") else 0
        seen = slot[index]
        slot[index] = float(price) if seen is None else min(seen, float(price))
    return {r: (v[0], v[1]) for r, v in out.items()}, currency


def priced(row: Instance, base: str, date: str) -> Instance:
    found, currency = rates(items(row.instance_type, base))
    if not found:
        return replace(row, prices=(), price=None, price_note="the Retail Prices API lists no Linux price for it")
    prices = tuple(Price(region, od, spot) for region, (od, spot) in sorted(found.items()))
    demand = [p.on_demand for p in prices if p.on_demand is not None]
    return replace(row, prices=prices, price=min(demand) if demand else None, currency=currency or "USD",
                   price_date=date, price_source=SOURCE, price_note=None,
                   regions=tuple(sorted(p.region for p in prices if p.on_demand is not None)))


def refresh(out_dir: Optional[str] = None, base: Optional[str] = None) -> List[str]:
    """``azure.json`` in ``out_dir`` (default: the user's catalogs): the shipped sizes with prices."""
    from cloudtrain.spec.errors import PlatformError
    base = base or os.environ.get("CLOUDTRAIN_AZURE_PRICES_URL") or API
    shipped = cat.load(SHIPPED)
    date = datetime.date.today().isoformat()
    try:
        rows = [row if row.retired else priced(row, base, date) for row in shipped.rows]
    except (OSError, ValueError) as exc:
        raise PlatformError(f"reading Azure's Retail Prices API ({base}) failed: {exc}") from None
    out_dir = out_dir or str(cat.user_dir())
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "azure.json")
    cat.write_text(path, cat.dump("azure", rows, date=date, source=f"{shipped.source}; prices: {SOURCE}",
                                  notes=shipped.notes or ""))
    return [path]
