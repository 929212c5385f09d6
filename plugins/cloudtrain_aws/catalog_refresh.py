"""Rebuild the EC2 (and EKS) and SageMaker catalogs from EC2's own API, through boto3.

``python -m cloudtrain_aws.catalog_refresh [--region R] [--out DIR]`` (or ``cloudtrain resources
--refresh -p ec2``) calls ``DescribeRegions``, ``DescribeInstanceTypes`` (every type with
``GpuInfo``) and ``DescribeInstanceTypeOfferings`` per region, and keeps the GPU types whose GPU
has a neutral name.  SageMaker's rows are the same types that botocore's SageMaker model lists
in its ``TrainingInstanceType`` enum, with ``ml.`` in front (no regions: SageMaker's differ).

Prices (EC2 rows): AWS's Price List (``pricing:GetProducts``, service ``AmazonEC2``, Linux,
shared tenancy, no pre-installed software, ``capacitystatus`` Used) for on-demand, and EC2's
``DescribeSpotPriceHistory`` (Linux/UNIX, the latest price, the lowest Availability Zone) per
region for spot.  A price source that cannot be read leaves the row's price null with the
reason in ``price_note``.  Rows the shipped file adds by hand (a ``source`` of their own: types
the API data lacks, such as p3) are kept.

What EC2's API does not say is added from AWS's documents, with the source in the file:
whether an instance's EFA device does RDMA read (libfabric aborts with
``FI_EFA_USE_DEVICE_RDMA=1`` on one that does not).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import Dict, Iterable, List, Optional, Tuple, Union

from cloudtrain.catalogs import catalog as cat
from cloudtrain.catalogs.catalog import Instance

CATALOG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogs")
# EC2 GpuInfo (name, memory in MiB) -> the neutral name (cloudtrain.spec.accelerators); None: no neutral name
GPU_NAMES: Dict[str, Union[str, Dict[int, str]]] = {
             "A100": {40960: "A100", 81920: "A100-80GB"}, "V100": {16384: "V100", 32768: "V100-32GB"},
             "H100": "H100", "H200": "H200", "B200": "B200", "B300": "B300", "L40S": "L40S", "L4": "L4",
             "A10G": "A10G", "T4": "T4",
             # g7e and g7 (EC2 GpuInfo names, as moto 5.2.5's recorded DescribeInstanceTypes data gives them)
             "RTX PRO Server 6000": "RTX-PRO-6000", "RTX PRO 4500": "RTX-PRO-4500"}
# Families whose EFA device does RDMA read.  AWS, "Elastic Fabric Adapter" (EC2 user guide,
# efa.html): "RDMA read is supported on all instances with Nitro version 4 and later"; p4d/p4de
# (GPUDirect RDMA over EFA since their launch), p5/p5e/p5en and p6 are such instances.  Not in
# this list (left to libfabric >= 1.18, which detects it): g4dn, g5, p3dn have no RDMA read
# (libfabric prov/efa efa_rdm_get_use_device_rdma aborts there), and families AWS's pages do not
# state plainly (g6, g6e).
RDMA_READ_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300")
SOURCE = ("EC2 DescribeInstanceTypes + DescribeInstanceTypeOfferings (region) through boto3, "
          "by cloudtrain_aws.catalog_refresh; efa_rdma_read from AWS's EFA guide "
          "(docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html: RDMA read on Nitro v4 and later)")
NOTES = ("price: null everywhere: DescribeInstanceTypes carries no price and cloudtrain reads no pricing API "
         "offline. efa = NetworkInfo.EfaInfo.MaximumEfaInterfaces.")


def neutral_gpu(name: str, mib: int) -> Optional[str]:
    found = GPU_NAMES.get(name)
    return found.get(mib) if isinstance(found, dict) else found


def family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def row_of(info: dict, regions: Iterable[str] = ()) -> Optional[Instance]:
    """One ``DescribeInstanceTypes`` item as a catalog row (None: no GPU with a neutral name)."""
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if len(gpus) != 1 or not gpus[0].get("Count"):
        return None
    gpu = gpus[0]
    mib = int((gpu.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
    name = neutral_gpu(gpu.get("Name", ""), mib)
    if name is None:
        return None
    net = info.get("NetworkInfo") or {}
    efa = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0) if net.get("EfaSupported") else 0
    kind = info["InstanceType"]
    return Instance(instance_type=kind, accelerator=name, count=int(gpu["Count"]),
                    accelerator_memory_gb=round(mib / 1024, 1), vcpus=(info.get("VCpuInfo") or {}).get("DefaultVCpus"),
                    memory_gb=round(int((info.get("MemoryInfo") or {}).get("SizeInMiB") or 0) / 1024, 1), efa=efa,
                    efa_rdma_read=bool(efa) and family(kind) in RDMA_READ_FAMILIES, regions=tuple(sorted(regions)))


def describe_gpu_types(ec2) -> List[dict]:
    out = []
    for page in ec2.get_paginator("describe_instance_types").paginate():
        out += [t for t in page.get("InstanceTypes", []) if t.get("GpuInfo")]
    return out


def offerings(session, regions: Iterable[str], types: List[str]) -> Dict[str, List[str]]:
    """instance type -> the regions that offer it."""
    where: Dict[str, List[str]] = {t: [] for t in types}
    for region in regions:
        client = session.client("ec2", region_name=region)
        for first in range(0, len(types), 200):
            for page in client.get_paginator("describe_instance_type_offerings").paginate(
                    LocationType="region",
                    Filters=[{"Name": "instance-type", "Values": types[first:first + 200]}]):
                for item in page.get("InstanceTypeOfferings", []):
                    where.setdefault(item["InstanceType"], []).append(region)
    return where


def sagemaker_training_types(session) -> List[str]:
    """``ml.*`` training instance types, from botocore's SageMaker service model."""
    model = session.client("sagemaker", region_name=session.region_name or "us-east-1").meta.service_model
    return list(model.shape_for("TrainingInstanceType").enum)


def fetch(session, regions: Optional[List[str]] = None) -> Tuple[List[Instance], List[Instance]]:
    """(EC2 rows, SageMaker rows) from the account's view of EC2."""
    ec2 = session.client("ec2", region_name=session.region_name or "us-east-1")
    infos = describe_gpu_types(ec2)
    if regions is None:
        regions = sorted(r["RegionName"] for r in ec2.describe_regions().get("Regions", []))
    where = offerings(session, regions, sorted(i["InstanceType"] for i in infos))
    rows = [row for row in (row_of(i, where.get(i["InstanceType"], ())) for i in infos) if row is not None]
    training = set(sagemaker_training_types(session))
    ml_rows = [Instance(**{**r.to_dict(), "instance_type": "ml." + r.instance_type, "regions": ()})
               for r in rows if "ml." + r.instance_type in training]
    return rows, ml_rows


PRICE_SOURCE = "AWS Price List GetProducts (AmazonEC2, Linux, Shared, NA, Used) + EC2 DescribeSpotPriceHistory " \
               "(Linux/UNIX, lowest Availability Zone), through boto3, by cloudtrain_aws.catalog_refresh"


def on_demand_prices(pricing, instance_type: str) -> Dict[str, float]:
    """region -> USD per hour, from the Price List's EC2 products for ``instance_type``."""
    return price_list(pricing, "AmazonEC2", (
        ("instanceType", instance_type), ("operatingSystem", "Linux"), ("tenancy", "Shared"),
        ("preInstalledSw", "NA"), ("capacitystatus", "Used")))


# SageMaker's Price List products (service AmazonSageMaker, productFamily "ML Instance") name the
# type in ``instanceName`` and the use in ``component`` ("Training", "Hosting", ...), as public
# scripts that read the offer file filter them; not checked against a live account here.
def sagemaker_prices(pricing, instance_type: str) -> Dict[str, float]:
    """region -> USD per hour of a SageMaker training instance (``ml.*``)."""
    return price_list(pricing, "AmazonSageMaker", (("instanceName", instance_type), ("component", "Training")))


def price_list(pricing, service: str, match) -> Dict[str, float]:
    """region -> the lowest positive hourly USD rate of the Price List products that match."""
    import json
    filters = [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in match]
    out: Dict[str, float] = {}
    for page in pricing.get_paginator("get_products").paginate(ServiceCode=service, Filters=filters):
        for text in page.get("PriceList", []):
            product = json.loads(text) if isinstance(text, str) else text
            region = ((product.get("product") or {}).get("attributes") or {}).get("regionCode")
            for term in ((product.get("terms") or {}).get("OnDemand") or {}).values():
                for dim in (term.get("priceDimensions") or {}).values():
                    usd = (dim.get("pricePerUnit") or {}).get("USD")
                    if region and usd and dim.get("unit") == "Hrs" and float(usd) > 0:
                        out[region] = min(float(usd), out.get(region, float("inf")))
    return out


def spot_prices(ec2, types: List[str]) -> Dict[str, float]:
    """instance type -> the lowest current spot price (USD per hour) over the region's zones."""
    import datetime as dt
    out: Dict[str, float] = {}
    for page in ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=types, ProductDescriptions=["Linux/UNIX"], StartTime=dt.datetime.now(dt.timezone.utc)):
        for item in page.get("SpotPriceHistory", []):
            if item.get("SpotPrice"):
                kind = item["InstanceType"]
                out[kind] = min(float(item["SpotPrice"]), out.get(kind, float("inf")))
    return out


def priced(session, rows: List[Instance], date: str) -> List[Instance]:
    """``rows`` with their prices from the Price List and the spot price history (each region
    the row lists); a source that fails leaves a note instead."""
    from dataclasses import replace
    from botocore.exceptions import BotoCoreError, ClientError
    from cloudtrain.catalogs.catalog import Price
    pricing = session.client("pricing", region_name="us-east-1")  # the Price List's own endpoint
    spot: Dict[str, Dict[str, float]] = {}
    note = None
    for region in sorted({reg for r in rows for reg in r.regions}):
        try:
            spot[region] = spot_prices(session.client("ec2", region_name=region), [r.instance_type for r in rows
                                                                                   if region in r.regions])
        except (BotoCoreError, ClientError) as exc:
            note = f"spot price history not read ({type(exc).__name__})"
    out = []
    failed = None  # the Price List's first failure: the others would fail alike (and retry slowly)
    for row in rows:
        try:
            if failed:
                raise failed
            demand = on_demand_prices(pricing, row.instance_type)
        except (BotoCoreError, ClientError) as exc:
            failed = exc
            out.append(replace(row, price_note=f"the Price List could not be read ({type(exc).__name__}); no price"))
            continue
        regions = sorted(set(demand) | {reg for reg in row.regions if row.instance_type in spot.get(reg, {})})
        found = tuple(Price(reg, demand.get(reg), spot.get(reg, {}).get(row.instance_type)) for reg in regions)
        rates = [p.on_demand for p in found if p.on_demand is not None]
        out.append(replace(row, prices=found, price=min(rates) if rates else None, currency="USD" if found else None,
                           price_date=date if found else None, price_source=PRICE_SOURCE if found else None,
                           price_note=note if found else "the Price List has no Linux on-demand price for it"))
    return out


def priced_sagemaker(session, rows: List[Instance], date: str) -> List[Instance]:
    """SageMaker rows with their training rates per region; the regions priced become the row's
    regions (a type the Price List prices in a region is offered there).  No spot rate: managed
    spot training bills a discount SageMaker does not publish per type."""
    from dataclasses import replace
    from botocore.exceptions import BotoCoreError, ClientError
    from cloudtrain.catalogs.catalog import Price
    pricing = session.client("pricing", region_name="us-east-1")
    out = []
    failed = None
    for row in rows:
        try:
            if failed:
                raise failed
            demand = sagemaker_prices(pricing, row.instance_type)
        except (BotoCoreError, ClientError) as exc:
            failed = exc
            out.append(replace(row, price_note=f"the Price List could not be read ({type(exc).__name__}); no price"))
            continue
        if not demand:
            out.append(replace(row, price_note="the Price List has no SageMaker training price for it"))
            continue
        found = tuple(Price(reg, rate, None) for reg, rate in sorted(demand.items()))
        out.append(replace(row, prices=found, price=min(demand.values()), currency="USD", price_date=date,
                           price_source=SAGEMAKER_PRICE_SOURCE, regions=tuple(sorted(demand)),
                           price_note="no spot rate: SageMaker publishes none per type"))
    return out


SAGEMAKER_PRICE_SOURCE = ("AWS Price List GetProducts (AmazonSageMaker, instanceName, component Training), through "
                          "boto3, by cloudtrain_aws.catalog_refresh; regions: those the Price List prices")


def hand_rows(shipped_dir: str = CATALOG_DIR) -> Tuple[List[Instance], List[Instance]]:
    """The rows the shipped files add by hand (a ``source`` of their own), EC2's and SageMaker's."""
    found = []
    for name in ("ec2.json", "sagemaker.json"):
        path = os.path.join(shipped_dir, name)
        found.append([r for r in cat.load(path).rows if r.source] if os.path.isfile(path) else [])
    return found[0], found[1]


def write(rows: List[Instance], ml_rows: List[Instance], out_dir: str, date: Optional[str] = None,
          via: str = "") -> List[str]:
    """``ec2.json`` and ``sagemaker.json`` in ``out_dir``; ``via`` says where the API answers came from."""
    date = date or datetime.date.today().isoformat()
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, these, source in (
            ("ec2", rows, SOURCE + via),
            ("sagemaker", ml_rows, SOURCE + via + "; ml.* names: botocore's SageMaker model, shape "
                                                  "TrainingInstanceType")):
        path = os.path.join(out_dir, f"{name}.json")
        cat.write_text(path, cat.dump(name, these, date=date, source=source, notes=NOTES))
        written.append(path)
    return written


def refresh(session=None, regions: Optional[List[str]] = None, out_dir: str = CATALOG_DIR,
            with_prices: bool = True) -> List[str]:
    """Both files from the account's EC2 (boto3's default credentials and region)."""
    if session is None:
        import boto3
        session = boto3.session.Session()
    from botocore.exceptions import BotoCoreError, ClientError
    from cloudtrain.spec.errors import PlatformError
    try:
        rows, ml_rows = fetch(session, regions)
    except (BotoCoreError, ClientError) as exc:
        raise PlatformError(f"reading EC2's instance types failed: {exc}; check your AWS credentials and region "
                            "(the refresh needs ec2:DescribeInstanceTypes, DescribeInstanceTypeOfferings, "
                            "DescribeRegions)") from None
    extra, ml_extra = hand_rows()
    rows += [r for r in extra if r.instance_type not in {x.instance_type for x in rows}]
    ml_rows += [r for r in ml_extra if r.instance_type not in {x.instance_type for x in ml_rows}]
    if with_prices:
        today = datetime.date.today().isoformat()
        rows = priced(session, rows, today)
        ml_rows = priced_sagemaker(session, ml_rows, today)
    return write(rows, ml_rows, out_dir)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cloudtrain_aws.catalog_refresh", description=__doc__.splitlines()[0])
    p.add_argument("--region", action="append", help="only these regions' offerings (default: every region)")
    p.add_argument("--out", default=CATALOG_DIR, help="directory of ec2.json and sagemaker.json")
    args = p.parse_args(argv)
    for path in refresh(regions=args.region, out_dir=args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
