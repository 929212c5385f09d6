"""The estimate describes the job the render sends (issue 40 items 6-7): the provider settings
the render honours -- region, spot, the stopping condition, a warm pool's keep-alive -- are the
estimate's too, and the ledger records the rate the estimate used, not the catalog's cheapest
on-demand one.  Rates: the ec2 catalog's rows (skypilot-catalog catalogs/v7/aws/vms.csv, as each
row's price_source says)."""
from types import SimpleNamespace

from cloudtrain.catalogs.prices import billing, estimate
from cloudtrain.extend.plugins import get_provider_class
from cloudtrain.input.loading import job_from_dict
from cloudtrain.orchestrate import ledger


def job(provider, options, **extra):
    data = {"name": "big", "command": "python train.py", "image": "i", "code": None,
            "distribution": {"type": "ddp", "nodes": 2}, "resources": {"accelerator": "H100", "gpus_per_node": 8},
            "providers": {provider: options}}
    data.update(extra)
    return job_from_dict(data)


def row_rate(provider, instance_type, region, spot):
    row = next(r for r in get_provider_class(provider).instance_rules().catalog().rows
               if r.instance_type == instance_type)
    found = row.price_in(region)
    return found.spot if spot else found.on_demand


def test_ec2_spot_and_region_are_the_estimates():
    """providers.ec2.spot asks for spot instances (render: InstanceMarketOptions), in
    providers.ec2.region: the estimate is that region's spot rate."""
    est = estimate(job("ec2", {"region": "us-west-2", "spot": True}), "ec2")
    assert (est.instance_type, est.region, est.spot) == ("p5.48xlarge", "us-west-2", True)
    assert est.rate == row_rate("ec2", "p5.48xlarge", "us-west-2", spot=True)
    assert est.rate < row_rate("ec2", "p5.48xlarge", "us-west-2", spot=False)
    # max_runtime_seconds' default (86400) stops the job: that is the ceiling's time
    assert est.max_hours == 24


def test_eks_region_is_the_estimates():
    est = estimate(job("eks", {"region": "ap-northeast-1", "cluster": "c"}), "eks")
    assert est.region == "ap-northeast-1"
    assert est.rate == row_rate("eks", "p5.48xlarge", "ap-northeast-1", spot=False)


def test_sagemaker_stopping_condition_and_warm_pool_bound_the_ceiling():
    est = estimate(job("sagemaker", {"region": "us-east-1", "max_runtime_seconds": 7200,
                                     "keep_alive_seconds": 1800}), "sagemaker")
    assert est.max_hours == 2 and est.idle_hours == 0.5  # KeepAlivePeriodInSeconds, billed per instance
    priced = est.__class__(**{**est.__dict__, "rate": 10.0, "currency": "USD"})
    assert priced.ceiling == 10.0 * 2 * (2 + 0.5)


def test_azure_spot_tier_is_spot():
    """queue_settings.job_tier: spot (azure-ai-ml QueueSettings) runs on low-priority capacity."""
    cls = get_provider_class("azure")
    assert billing(job("azure", {"job_tier": "spot"}), cls, cls.instance_rules()).spot is True
    assert billing(job("azure", {}), cls, cls.instance_rules()).spot is False


def test_the_ledger_records_the_rate_the_estimate_used():
    j = job("ec2", {"region": "us-west-2", "spot": True})
    cls = get_provider_class("ec2")
    rendered = SimpleNamespace(job=j, options=cls.options(j), provider="ec2")
    instance_type, rate, currency, spot = ledger.rate_of(rendered)
    est = estimate(j, "ec2")
    assert (instance_type, rate, currency, spot) == ("p5.48xlarge", est.rate, "USD", True)
    # not the row's cheapest on-demand rate in any region
    cheapest = next(r for r in cls.instance_rules().catalog().rows if r.instance_type == "p5.48xlarge").price
    assert rate != cheapest


def test_an_azure_compute_cluster_is_priced_at_its_own_size_or_not_at_all():
    """The render leaves a named compute cluster's VM size alone (cloudtrain_azure.render
    known_vm_size: read with compute.get at submit), so the estimate does not guess one."""
    est = estimate(job("azure", {"compute": "gpu-cluster"}), "azure")
    assert est.rate is None and est.instance_type is None and "gpu-cluster" in est.note
    sized = estimate(job("azure", {"compute": "gpu-cluster", "vm_size": "Standard_ND96isr_H100_v5"}), "azure")
    assert sized.instance_type == "Standard_ND96isr_H100_v5"
