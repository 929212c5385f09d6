"""Prices in the catalogs (issue 31 items 1-2) and the catalogs' regions and retired rows (issue
28 item 7): ``resources`` prices and sorts, ``validate``/``submit`` print the estimate before
anything is sent and ``max_hourly_cost`` refuses above it, ``catalog refresh`` rebuilds the
user's copy through each platform's price source (loopback doubles answering each API's
documented response shape, parsed by the SDK's own model where there is an SDK)."""
from __future__ import annotations

import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from cloudtrain.extend import plugins
from cloudtrain.spec.errors import CloudtrainWarning, JobFileError
from cloudtrain.input.loading import job_from_dict
from conftest import run_cli, write_job

EC2 = {"region": "us-east-1", "subnet_id": "subnet-1", "image_id": "ami-0123456789abcdef0",
       "instance_profile": "node", "code_s3": "s3://team-bucket/code"}


def ec2_job(tmp_path, extra: str = "", accelerator: str = "H100", region: str = "us-east-1"):
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text("print(1)\n")
    options = ", ".join(f"{k}: {json.dumps(v if k != 'region' else region)}" for k, v in EC2.items())
    return write_job(tmp_path, f"""
        name: big
        command: python train.py
        code: code
        distribution: {{type: ddp, nodes: 2}}
        resources: {{accelerator: {accelerator}, gpus_per_node: 8}}
        max_runtime: 8h
        providers: {{ec2: {{{options}}}}}
        """ + extra)


def table(stdout: str):
    """The rows of ``resources``' table, cut at its header's column starts (cells hold blanks)."""
    import re
    lines = stdout.rstrip().splitlines()
    if not lines:
        return []
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])] + [None]
    names = lines[0].split()
    return [{n: line[a:b].strip() for n, a, b in zip(names, starts, starts[1:])} for line in lines[1:]]


def test_resources_prints_price_and_currency_cheapest_first_and_takes_max_price(home):
    # EC2 rates: skypilot-catalog catalogs/v7/aws/vms.csv (commit 001367d), as the row's price_source says
    rows = table(run_cli("resources", "--accelerator", "H100", "--gpus", "8", check=0).stdout)
    p5 = next(r for r in rows if r["PROVIDER"] == "ec2")
    assert (p5["INSTANCE_TYPE"], p5["PRICE/H"], p5["SPOT/H"], p5["CURRENCY"], p5["REGION"]) == \
        ("p5.48xlarge", "98.32", "20.9934", "USD", "us-east-1")
    priced = [float(r["PRICE/H"]) for r in rows if r["PRICE/H"] != "-"]
    assert priced and priced == sorted(priced)  # cheapest first
    assert all(r["PRICE/H"] == "-" for r in rows[len(priced):])  # rows without a price come last
    cheap = table(run_cli("resources", "--max-price", "90", check=0).stdout)
    assert cheap and all(float(r["PRICE/H"]) <= 90 for r in cheap)
    assert "p5en.48xlarge" in {r["INSTANCE_TYPE"] for r in cheap}
    assert "p5.48xlarge" not in {r["INSTANCE_TYPE"] for r in cheap}
    data = json.loads(run_cli("resources", "-p", "ec2", "--accelerator", "H200", "-o", "json", check=0).stdout)
    p5en = next(r for r in data if r["instance_type"] == "p5en.48xlarge")
    assert p5en["prices"]["us-east-1"] == {"on_demand": 84.8, "spot": 24.2902}
    assert p5en["price_source"].startswith("skypilot-org/skypilot-catalog") and p5en["price_date"]


def test_every_catalog_row_has_a_price_or_says_why_not():
    for name, info in plugins.providers().items():
        rules = info.cls.instance_rules()
        if rules is None:
            continue
        for row in rules.catalog().rows:
            if row.prices:
                assert row.currency in ("USD", "CNY") and row.price_date and row.price_source, (name, row)
            else:
                assert row.price is None and row.price_note, (name, row.instance_type)


def test_validate_prints_the_estimate_and_max_hourly_cost_refuses_naming_both_numbers(tmp_path, home):
    path = ec2_job(tmp_path, "max_hourly_cost: 400\n")
    proc = run_cli("validate", "-p", "ec2", path, check=0)
    # 2 nodes x p5.48xlarge at 98.32 USD/h in us-east-1, x 8 h
    assert "estimate: 2 x p5.48xlarge at 98.32 USD/h" in proc.stderr and "196.64 USD/h" in proc.stderr
    assert "1,573.12 USD" in proc.stderr
    path = ec2_job(tmp_path, "max_hourly_cost: 150\n")
    proc = run_cli("validate", "-p", "ec2", path, check=2)
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("estimate: 2 x p5.48xlarge at 98.32 USD/h")  # the estimate, then the refusal
    assert lines[1].startswith(f"cloudtrain: error: {path}:8: max_hourly_cost: the estimate 196.64 USD/h")
    assert "above max_hourly_cost 150" in lines[1] and len(lines) == 2
    dry = run_cli("submit", "-p", "ec2", path, "--dry-run", check=2)  # refused before the render is printed
    assert dry.stdout == "" and "max_hourly_cost" in dry.stderr


def test_max_hourly_cost_without_a_known_price_is_refused():
    # sa-east-1 offers p4d (DescribeInstanceTypeOfferings) but the snapshot's source prices no p4d there
    job = job_from_dict({"name": "x", "command": "c", "distribution": {"nodes": 1},
                         "resources": {"accelerator": "A100", "gpus_per_node": 8}, "max_hourly_cost": 1000,
                         "providers": {"ec2": {**EC2, "region": "sa-east-1"}}})
    from cloudtrain.catalogs.prices import check_max_hourly_cost, estimate
    est = estimate(job, "ec2")
    assert est.instance_type == "p4d.24xlarge" and est.rate is None
    with pytest.raises(JobFileError, match="has no price for this job"):
        check_max_hourly_cost(job, est)


def test_spot_uses_the_spot_rate():
    from cloudtrain.catalogs.prices import estimate
    # p5e: the source has a spot price but no on-demand one (us-east-2: 14.4663, the lowest zone's)
    spec = {"name": "x", "command": "c", "spot": True, "distribution": {"nodes": 3},
            "resources": {"accelerator": "H200", "gpus_per_node": 8},
            "providers": {"ec2": {**EC2, "region": "us-east-2"}}}
    est = estimate(job_from_dict(spec), "ec2")
    assert (est.instance_type, est.spot, est.rate, round(est.hourly, 4)) == ("p5e.48xlarge", True, 14.4663, 43.3989)
    on_demand = estimate(job_from_dict({**spec, "spot": False}), "ec2")
    assert on_demand.rate is None and "no price in us-east-2" in on_demand.note
    # the H200 candidates are partly priced (p5en is, p5e has no on-demand rate): the choice stays by
    # size, and a partly priced family never makes a bigger type look cheaper: g6.2xlarge is priced in
    # the snapshot, g6.xlarge (smaller) is not, and L4 x 1 stays g6.xlarge
    from cloudtrain.catalogs.instances import choose
    job = job_from_dict({"name": "x", "command": "c", "resources": {"accelerator": "L4", "gpus_per_node": 1},
                         "providers": {"ec2": dict(EC2)}})
    assert choose(job, plugins.get_provider_class("ec2").instance_rules(), None).instance_type == "g6.xlarge"


def test_a_type_not_offered_in_the_region_is_refused_when_resolved_and_warned_when_named(tmp_path, home):
    # issue 28 item 7: ec2 in eu-west-3 with A100 rendered p4d.24xlarge, which the catalog does not list there
    path = ec2_job(tmp_path, accelerator="A100", region="eu-west-3")
    proc = run_cli("validate", "-p", "ec2", path, check=2)
    assert "resources.accelerator: ec2 offers no A100 x 8 in eu-west-3" in proc.stderr and "us-east-1" in proc.stderr
    job = job_from_dict({"name": "x", "command": "c", "resources": {"gpus_per_node": 8},
                         "providers": {"ec2": {**EC2, "region": "eu-west-3", "instance_type": "p4d.24xlarge"}}})
    from cloudtrain.catalogs.instances import choose
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        choice = choose(job, plugins.get_provider_class("ec2").instance_rules(), "p4d.24xlarge")
    assert choice.instance_type == "p4d.24xlarge"
    assert any(issubclass(w.category, CloudtrainWarning) and "not offered in eu-west-3" in str(w.message) for w in seen)


def test_azure_never_picks_a_retired_ncv3_size(home):
    # Microsoft (MicrosoftDocs azure-docs, NCv3 retirement): NC6s/12s/24s_v3 and NC24rs_v3 retired 2025-09-30
    from cloudtrain.catalogs.instances import choose
    rules = plugins.get_provider_class("azure").instance_rules()
    job = job_from_dict({"name": "x", "command": "c", "resources": {"accelerator": "V100", "gpus_per_node": 4}})
    with pytest.raises(JobFileError, match="azure offers no V100 "):
        choose(job, rules, None)
    named = job_from_dict({"name": "x", "command": "c", "resources": {"gpus_per_node": 4}})
    with pytest.warns(CloudtrainWarning, match="retired by the platform on 2025-09-30"):
        choose(named, rules, "Standard_NC24rs_v3")
    listed = run_cli("resources", "-p", "azure", "--accelerator", "V100", "--gpus", "4", check=0)
    assert listed.stdout == "" and "retired: azure Standard_NC24rs_v3 (2025-09-30)" in listed.stderr


def test_v100_and_the_newer_types_are_in_the_aws_catalogs():
    import botocore.session
    enum = set(botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingInstanceType").enum)
    sm = plugins.get_provider_class("sagemaker").instance_rules().catalog()
    ec2 = plugins.get_provider_class("ec2").instance_rules().catalog()
    for size, count in (("2xlarge", 1), ("8xlarge", 4), ("16xlarge", 8)):  # botocore's TrainingInstanceType
        assert f"ml.p3.{size}" in enum and sm.get(f"ml.p3.{size}").count == count
        assert ec2.get(f"p3.{size}").accelerator == "V100"
    assert {r.instance_type for r in sm.rows} <= enum  # nothing SageMaker would refuse as a training type
    assert ec2.get("g6e.48xlarge").accelerator == "L40S"
    # g7e / g7: EC2 GpuInfo "RTX PRO Server 6000" (96 GB) / "RTX PRO 4500" (moto 5.2.5's recorded EC2 data)
    assert (ec2.get("g7e.48xlarge").accelerator, ec2.get("g7e.48xlarge").count) == ("RTX-PRO-6000", 8)
    assert sm.get("ml.g7.48xlarge").accelerator == "RTX-PRO-4500" and "ml.g7e.2xlarge" in enum
    from cloudtrain.spec.accelerators import canonical
    assert canonical("rtx pro 6000") == "RTX-PRO-6000"


class _Replay(BaseHTTPRequestHandler):
    """Answers with ``self.server.answer(path, body)`` as JSON."""

    def do_GET(self):
        self._reply(self.server.answer(self.path, b""))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        target = self.headers.get("X-Amz-Target")
        self.server.seen.append((target, json.loads(body or b"{}") if target else parse_qs(body.decode())))
        self._reply(self.server.answer(self.path, body))

    def _reply(self, payload):
        xml = isinstance(payload, str)
        data = payload.encode() if xml else json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/xml" if xml else "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def replay():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Replay)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _azure_item(region, price, sku="ND96asr A100 v4", product="Virtual Machines NDasrA100v4 Series"):
    # the documented shape (learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices)
    return {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
            "armRegionName": region, "location": region, "effectiveStartDate": "2024-01-01T00:00:00Z",
            "meterId": "m", "meterName": sku, "productId": "p", "skuId": "s", "productName": product,
            "skuName": sku, "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8", "serviceFamily": "Compute",
            "unitOfMeasure": "1 Hour", "type": "Consumption", "isPrimaryMeterRegion": True,
            "armSkuName": "Standard_ND96asr_v4"}


def test_catalog_refresh_azure_reads_the_retail_prices_api_into_the_users_copy(replay, home):
    root = f"http://127.0.0.1:{replay.server_address[1]}"
    base = root + "/api/retail/prices"

    def answer(path, _body):
        query = parse_qs(urlparse(path).query)
        if "armSkuName eq 'Standard_ND96asr_v4'" not in query.get("$filter", [""])[0]:
            return {"BillingCurrency": "USD", "Items": [], "NextPageLink": None, "Count": 0}
        if "page" not in query:
            return {"BillingCurrency": "USD", "Count": 3, "NextPageLink": root + path + "&page=2", "Items": [
                _azure_item("eastus", 27.197), _azure_item("eastus", 3.1, sku="ND96asr A100 v4 Low Priority"),
                _azure_item("eastus", 32.77, product="Virtual Machines NDasrA100v4 Series Windows")]}
        return {"BillingCurrency": "USD", "Count": 2, "NextPageLink": None, "Items": [
            _azure_item("eastus", 5.4394, sku="ND96asr A100 v4 Spot"), _azure_item("westeurope", 30.1)]}
    replay.answer = answer
    proc = run_cli("catalog", "refresh", "-p", "azure", env={"CLOUDTRAIN_AZURE_PRICES_URL": base}, check=0)
    written = proc.stdout.split()
    assert written == [str(home / "catalogs" / "azure.json")]
    rows = table(run_cli("resources", "-p", "azure", "--accelerator", "A100", "--gpus", "8", "--region", "eastus",
                         check=0).stdout)
    row = next(r for r in rows if r["INSTANCE_TYPE"] == "Standard_ND96asr_v4")
    # Linux consumption rate; Windows and Low Priority meters left out; the spot meter is spot
    assert (row["PRICE/H"], row["SPOT/H"], row["CURRENCY"]) == ("27.197", "5.4394", "USD")
    assert {r["INSTANCE_TYPE"] for r in table(run_cli("resources", "-p", "azure", "--region", "westus",
                                                      "--accelerator", "A100", "--gpus", "8", check=0).stdout)
            if r["INSTANCE_TYPE"] == "Standard_ND96asr_v4"} == set()  # priced in eastus/westeurope only


def test_the_price_list_refresh_reads_get_products_through_boto3(replay):
    import boto3
    from cloudtrain_aws.catalog_refresh import on_demand_prices

    def product(region, usd, unit="Hrs"):
        # AWS Price List GetProducts: PriceList is a list of JSON strings
        # (botocore's pricing model: SynthesizedJsonPriceListJsonItem)
        return json.dumps({"product": {"attributes": {"instanceType": "p5.48xlarge", "regionCode": region,
                                                      "operatingSystem": "Linux", "tenancy": "Shared"}},
                           "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {"SKU.JRTCKXETXF.6YS6EN2CT7": {
                               "unit": unit, "pricePerUnit": {"USD": usd}}}}}}})
    replay.answer = lambda path, body: {"FormatVersion": "aws_v1", "PriceList": [
        product("us-east-1", "98.3200000000"), product("eu-north-1", "105.2024000000"),
        product("us-west-2", "0.0000000000")]}
    client = boto3.client("pricing", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{replay.server_address[1]}",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    assert on_demand_prices(client, "p5.48xlarge") == {"us-east-1": 98.32, "eu-north-1": 105.2024}
    target, sent = replay.seen[0]
    assert target == "AWSPriceListService.GetProducts" and sent["ServiceCode"] == "AmazonEC2"
    assert {"Type": "TERM_MATCH", "Field": "instanceType", "Value": "p5.48xlarge"} in sent["Filters"]


def test_spot_prices_read_describe_spot_price_history_through_boto3_and_keep_the_lowest_zone(replay):
    import boto3
    from cloudtrain_aws.catalog_refresh import spot_prices

    def item(kind, zone, price):
        return (f"<item><instanceType>{kind}</instanceType><productDescription>Linux/UNIX</productDescription>"
                f"<spotPrice>{price}</spotPrice><timestamp>2026-11-24T10:00:00.000Z</timestamp>"
                f"<availabilityZone>{zone}</availabilityZone></item>")
    # EC2's query API answers in XML (botocore's ec2 model: DescribeSpotPriceHistoryResult, spotPriceHistorySet)
    replay.answer = lambda path, body: (
        '<?xml version="1.0" encoding="UTF-8"?><DescribeSpotPriceHistoryResponse '
        'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-1</requestId><spotPriceHistorySet>'
        + item("p5.48xlarge", "us-east-1a", "30.326000") + item("p5.48xlarge", "us-east-1c", "20.993400")
        + item("p4d.24xlarge", "us-east-1b", "5.093300")
        + "</spotPriceHistorySet><nextToken></nextToken></DescribeSpotPriceHistoryResponse>")
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{replay.server_address[1]}",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    assert spot_prices(ec2, ["p5.48xlarge", "p4d.24xlarge"]) == {"p5.48xlarge": 20.9934, "p4d.24xlarge": 5.0933}
    _, sent = replay.seen[0]
    assert sent["Action"] == ["DescribeSpotPriceHistory"] and sent["ProductDescription.1"] == ["Linux/UNIX"]
    assert {sent["InstanceType.1"][0], sent["InstanceType.2"][0]} == {"p5.48xlarge", "p4d.24xlarge"}


def test_the_ec2_refresh_prices_each_row_per_region_from_both_sources(replay):
    import boto3
    from cloudtrain.catalogs.catalog import Instance
    from cloudtrain_aws.catalog_refresh import priced
    url = f"http://127.0.0.1:{replay.server_address[1]}"

    class Session:  # boto3's Session.client, every endpoint on the loopback double
        def client(self, name, region_name=None):
            return boto3.client(name, region_name=region_name, endpoint_url=url, aws_access_key_id="testing",
                                aws_secret_access_key="testing")

    def answer(path, body):
        if b"AmazonEC2" in body:  # the Price List
            return {"FormatVersion": "aws_v1", "PriceList": [json.dumps({
                "product": {"attributes": {"regionCode": "us-east-1"}},
                "terms": {"OnDemand": {"a": {"priceDimensions": {"b": {"unit": "Hrs",
                                                                       "pricePerUnit": {"USD": "98.32"}}}}}}})]}
        return ('<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r'
                '</requestId><spotPriceHistorySet><item><instanceType>p5.48xlarge</instanceType><productDescription>'
                'Linux/UNIX</productDescription><spotPrice>20.9934</spotPrice><timestamp>2026-11-24T10:00:00Z'
                '</timestamp><availabilityZone>us-east-1c</availabilityZone></item></spotPriceHistorySet>'
                '</DescribeSpotPriceHistoryResponse>')
    replay.answer = answer
    row = Instance("p5.48xlarge", "H100", 8, regions=("us-east-1",))
    [out] = priced(Session(), [row], "2026-11-24")
    assert (out.rate("us-east-1"), out.rate("us-east-1", spot=True), out.currency, out.price_date) == \
        (98.32, 20.9934, "USD", "2026-11-24")
    assert out.price_source.startswith("AWS Price List") and out.price_note is None


def test_the_sagemaker_refresh_prices_training_instances_and_takes_their_regions_from_the_price_list(replay):
    import boto3
    from cloudtrain.catalogs.catalog import Instance
    from cloudtrain_aws.catalog_refresh import priced_sagemaker
    url = f"http://127.0.0.1:{replay.server_address[1]}"

    class Session:
        def client(self, name, region_name=None):
            return boto3.client(name, region_name=region_name, endpoint_url=url, aws_access_key_id="testing",
                                aws_secret_access_key="testing")

    def product(region, usd):
        return json.dumps({"product": {"productFamily": "ML Instance", "attributes": {
            "instanceName": "ml.p4d.24xlarge", "component": "Training", "regionCode": region}},
            "terms": {"OnDemand": {"a": {"priceDimensions": {"b": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}})
    replay.answer = lambda path, body: {"FormatVersion": "aws_v1", "PriceList": [
        product("us-east-1", "12.5"), product("eu-west-1", "13.5")]}
    [out] = priced_sagemaker(Session(), [Instance("ml.p4d.24xlarge", "A100", 8)], "2026-11-24")
    assert out.regions == ("eu-west-1", "us-east-1") and out.rate("us-east-1") == 12.5
    assert out.rate("us-east-1", spot=True) == 12.5 and "no spot" in out.price_note  # no spot rate: on-demand
    _, sent = replay.seen[0]
    assert sent["ServiceCode"] == "AmazonSageMaker"
    assert {"Type": "TERM_MATCH", "Field": "component", "Value": "Training"} in sent["Filters"]


def test_the_python_api_refuses_a_job_above_max_hourly_cost_before_sending_it(tmp_path):
    from cloudtrain import api
    (tmp_path / "train.py").write_text("print(1)\n")
    job = job_from_dict({"name": "x", "command": "python train.py", "code": str(tmp_path),
                         "distribution": {"nodes": 2}, "resources": {"accelerator": "H100", "gpus_per_node": 8},
                         "max_hourly_cost": 100, "providers": {"ec2": dict(EC2)}})
    with pytest.raises(JobFileError, match=r"196.64 USD/h .* above max_hourly_cost 100"):
        api.validate(job, "ec2")
