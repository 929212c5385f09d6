"""The AWS double's reset between tests (tests/doubles/aws_double.py ``reset_ec2``): moto's EC2 state
is gone, its default AMIs are all there as moto made them, and the second reset keeps them
without rebuilding them."""
BUCKET = "reset-bucket"


def images(aws):
    """moto's AMIs of the region: id -> (name, owner, public)."""
    return {i: (a.name, a.owner_id, a.is_public) for i, a in aws.backend("ec2").amis.items()}


def test_reset_forgets_instances_and_keeps_the_default_amis(aws_server, monkeypatch):
    aws = aws_server.fresh(monkeypatch, BUCKET)
    ec2 = aws.client("ec2")
    defaults = images(aws)
    assert "ami-12c6146b" in defaults and len(defaults) > 100   # moto's own list, not a short one
    for _ in range(2):                                          # moto's reset, then the double's
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)
        ec2.create_tags(Resources=["ami-12c6146b"], Tags=[{"Key": "k", "Value": "v"}])
        snapshot = ec2.describe_images(ImageIds=["ami-12c6146b"])["Images"][0]["BlockDeviceMappings"][0]
        aws.fresh(monkeypatch, BUCKET)
        assert ec2.describe_instances()["Reservations"] == []
        assert images(aws) == defaults
        image = ec2.describe_images(ImageIds=["ami-12c6146b"])["Images"][0]
        assert image["Tags"] == []
        assert ec2.describe_snapshots(SnapshotIds=[image["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]])["Snapshots"]
    assert snapshot["Ebs"]["SnapshotId"] == image["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]  # kept, not rebuilt

