"""The EC2/EKS and SageMaker catalogs: rebuilt from EC2's own API (DescribeInstanceTypes, through
boto3, against the loopback double whose data is moto's recorded copy of EC2's answers), and the
shipped files are exactly what that rebuild writes."""
from __future__ import annotations

import json

from doubles.aws_double import AwsDouble
from cloudtrain.catalogs import catalog
from cloudtrain_aws import catalog_refresh
from cloudtrain_aws.instances import ec2_catalog, sagemaker_catalog
from conftest import run_cli


def test_cli_refresh_rebuilds_the_shipped_catalogs_through_describe_instance_types(tmp_path):
    with AwsDouble() as aws:
        proc = run_cli("resources", "--refresh", "-p", "ec2", "--out", tmp_path, env=aws.env(), check=0)
        assert aws.count("DescribeInstanceTypes") >= 1 and aws.count("DescribeInstanceTypeOfferings") >= 1
    assert proc.stdout.split() == [str(tmp_path / "ec2.json"), str(tmp_path / "sagemaker.json")]
    fresh, shipped = catalog.load(str(tmp_path / "ec2.json")), ec2_catalog()
    # what render reads offline is what the refresh makes (types, regions, devices; the double
    # serves no Price List, so the shipped snapshot's prices are not compared here: tests/core/test_prices.py)
    assert types_of(fresh) == types_of(shipped)
    assert types_of(catalog.load(str(tmp_path / "sagemaker.json"))) == types_of(sagemaker_catalog())
    # EC2's facts (NetworkInfo.EfaInfo, GpuInfo), per AWS's instance-type data
    p4d, p5, g5 = fresh.get("p4d.24xlarge"), fresh.get("p5.48xlarge"), fresh.get("g5.48xlarge")
    assert (p4d.accelerator, p4d.count, p4d.efa, p4d.efa_rdma_read) == ("A100", 8, 4, True)
    assert (p5.accelerator, p5.efa, p5.efa_rdma_read) == ("H100", 32, True)
    assert (g5.accelerator, g5.efa, g5.efa_rdma_read) == ("A10G", 1, False)  # EFA without RDMA read
    assert fresh.get("p4de.24xlarge").accelerator == "A100-80GB" and "us-east-1" in p4d.regions


def types_of(cat):
    from dataclasses import replace
    return [replace(r, price=None, prices=(), currency=None, price_date=None, price_source=None, price_note=None)
            for r in cat.rows]


def test_a_gpu_without_a_neutral_name_is_left_out():
    info = {"InstanceType": "g5g.xlarge", "GpuInfo": {"Gpus": [{"Name": "T4g", "Count": 1,
                                                                 "MemoryInfo": {"SizeInMiB": 16384}}]}}
    assert catalog_refresh.row_of(info) is None
    info["GpuInfo"]["Gpus"][0].update(Name="A100", MemoryInfo={"SizeInMiB": 81920})
    assert catalog_refresh.row_of(info).accelerator == "A100-80GB"


def test_every_catalog_file_says_its_date_and_source():
    import glob
    import os
    import cloudtrain_aws
    import cloudtrain_azure
    files = [f for pkg in (cloudtrain_aws, cloudtrain_azure)
             for f in glob.glob(os.path.join(os.path.dirname(pkg.__file__), "catalogs", "*.json"))]
    assert len(files) >= 3
    for path in files:
        with open(path) as f:
            head = json.load(f)
        assert head["date"] and head["source"] and head["rows"], path
