"""TI-ONE prices (issue 31 item 1): ``cloudtrain catalog refresh -p tione`` asks
``DescribeBillingSpecsPrice`` (tencentcloud-sdk-python-tione, API 2021-11-11) for the specs
``DescribeBillingSpecs`` lists, through the SDK against the loopback double, whose requests and
answers are loaded into the SDK's own models (``validate_model``): ``SpecsParam`` of
``SpecUnit{SpecName, SpecCount}``, ``SpecsPrice`` of ``SpecPrice{SpecName, TotalCost (fen), ...}``."""
from __future__ import annotations

import json

from test_tione_resources import DOC_SPECS
from conftest import run_cli
from doubles.tione_double import SECRET_ID, SECRET_KEY, FakeTione


class PricedTione(FakeTione):
    prices_fen = {"TI.GN10.20XLARGE320.POST": 16728, "TI.S.LARGE.POST": 120}

    def DescribeBillingSpecsPrice(self, body: dict) -> dict:
        return {"SpecsPrice": [{"SpecName": u["SpecName"], "SpecCount": u["SpecCount"],
                                "TotalCost": self.prices_fen[u["SpecName"]] * u["SpecCount"],
                                "RealTotalCost": self.prices_fen[u["SpecName"]] * u["SpecCount"]}
                               for u in body["SpecsParam"] if u["SpecName"] in self.prices_fen]}


def test_catalog_refresh_prices_tione_specs_in_cny_per_hour(home):
    with PricedTione() as fake:
        fake.billing_specs = DOC_SPECS
        env = {"TENCENTCLOUD_SECRET_ID": SECRET_ID, "TENCENTCLOUD_SECRET_KEY": SECRET_KEY,
               "CLOUDTRAIN_TIONE_ENDPOINT": fake.url, "TENCENTCLOUD_REGION": "ap-shanghai"}
        run_cli("catalog", "refresh", "-p", "tione", env=env, check=0)
        asked = fake.bodies("DescribeBillingSpecsPrice")
        assert not fake.bad_requests  # requests and answers fit the SDK's models
    assert asked == [{"SpecsParam": [{"SpecName": n, "SpecCount": 1} for n in (
        "TI.GN10.20XLARGE320.POST", "TI.GN7.8XLARGE128.POST", "TI.S.LARGE.POST")]}]
    listed = json.loads(run_cli("resources", "-p", "tione", "-o", "json", check=0).stdout)
    rows = {r["instance_type"]: r for r in listed}
    v100 = rows["TI.GN10.20XLARGE320.POST"]
    assert (v100["rate"], v100["currency"], v100["prices"]) == (167.28, "CNY", {"ap-shanghai": {"on_demand": 167.28,
                                                                                                "spot": None}})
    t4 = rows["TI.GN7.8XLARGE128.POST"]  # the answer left it out: no price, and the row says so
    assert t4["rate"] is None and "no price" in t4["price_note"]
    assert (home / "catalogs" / "tione.json").is_file()  # the user's copy; the shipped file is untouched
