"""Issue 40: ec2 rows that said "no price" where the cited source prices them, and spot rates equal to
on-demand (the source's placeholders) quoted as spot.

The source the rows cite: skypilot-org/skypilot-catalog catalogs/v7/aws/vms.csv at commit
001367d22a0033fac286a8c71aeac7109e431bcb (columns InstanceType, ..., Price, SpotPrice, Region,
AvailabilityZone; one line per zone).  Its lines for g6.12xlarge in us-east-1 read Price 4.6016 and
SpotPrice 1.9438 (use1-az1), 2.3398 (az2), 1.9139 (az4), 1.8626 (az6): the row's rate is the
on-demand Price, its spot the lowest zone's.  Where every zone's SpotPrice equals the Price
(p5.48xlarge in ca-central-1: 113.068 both), the source read no spot price.
"""
from cloudtrain.catalogs.catalog import parse
from cloudtrain.catalogs.prices import estimate
from cloudtrain.input.loading import job_from_dict
from cloudtrain_aws.instances import ec2_catalog


def job(**ec2):
    return job_from_dict({"name": "x", "command": "python t.py", "distribution": {"type": "ddp", "nodes": 2},
                          "max_runtime": "1h", "providers": {"ec2": ec2}})


def test_rows_the_source_prices_have_its_prices():
    catalog = ec2_catalog()
    g6 = catalog.get("g6.12xlarge")
    assert g6.rate("us-east-1") == 4.6016 and g6.rate("us-east-1", spot=True) == 1.8626
    assert g6.rate("us-west-2", spot=True) == 1.6626  # usw2-az2 has no SpotPrice: the other zones' lowest
    assert g6.price == 4.6016 and "skypilot-catalog" in g6.price_source
    # the default A10G type for one GPU, and the L4/L40S sizes read from the same lines
    assert catalog.get("g5.xlarge").rate("us-east-1") == 1.006
    assert catalog.get("g5.xlarge").rate("ap-northeast-2", spot=True) == 0.3376  # not apne2-az3's 1.237 (= Price)
    for name in ("g6.16xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge"):
        assert catalog.get(name).rate("us-east-1") is not None, name
    est = estimate(job(instance_type="g6.12xlarge", region="us-east-1"), "ec2")
    assert (est.rate, est.hourly) == (4.6016, 9.2032)
    assert "on-demand, us-east-1" in est.line()


def test_a_spot_rate_equal_to_on_demand_is_no_spot_price():
    p5 = ec2_catalog().get("p5.48xlarge")
    assert p5.price_in("ca-central-1").spot is None and p5.price_in("ca-central-1").on_demand == 113.068
    assert "ca-central-1" in p5.price_note
    # whatever catalog is read (a refreshed one, a user's): the placeholder is not a spot price
    read = parse({"rows": [{"instance_type": "t", "prices": {"r1": {"on_demand": 2.0, "spot": 2.0},
                                                             "r2": {"on_demand": 2.0, "spot": 0.5}}}]})
    assert read.get("t").price_in("r1").spot is None and read.get("t").price_in("r2").spot == 0.5


def test_spot_without_a_spot_price_says_so_and_quotes_on_demand_as_on_demand():
    est = estimate(job(instance_type="p5.48xlarge", region="ca-central-1", spot=True), "ec2")
    assert est.spot is False and est.rate == 113.068  # never an on-demand rate labelled spot
    assert "spot price unknown" in est.line() and "(on-demand" in est.line()
    priced = estimate(job(instance_type="p5.48xlarge", region="us-east-1", spot=True), "ec2")
    assert priced.spot is True and priced.rate == 20.9934 and "unknown" not in priced.line()
