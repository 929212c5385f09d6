"""A submit that fails after it created something removes it before it returns (issue 39, item 2):
``CloudProvider.schedule`` undoes what ``_create`` announced (``made``).  ec2 against the AWS
double with one call refused (403 AccessDenied, as a least-privilege policy that allows tags only
on create refuses ``CreateTags``): no instance is left running, the CLI exits 3 with one line."""
import pytest

from cloudtrain.spec.errors import PlatformError
from conftest import EXAMPLES, run_cli
from test_aws_ec2 import SETS, digits, provider


def states(aws):
    return [i["State"]["Name"] for r in aws.client("ec2").describe_instances()["Reservations"]
            for i in r["Instances"]]


@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, "ct-code", instance_profile="cloudtrain-node")


def test_a_refused_tag_terminates_the_instances_the_submit_started(aws):
    aws.fail("CreateTags", "forbidden")
    with pytest.raises(PlatformError, match="AccessDenied") as info:
        provider(aws).submit(digits())
    assert info.value.exit_code == 3
    assert aws.count("RunInstances") == 1 and aws.count("TerminateInstances") == 1
    assert len(states(aws)) == 2 and set(states(aws)) == {"terminated"}
    assert aws.count("SendCommand") == 0  # nothing was sent to a node
    assert "removed what this submit had made" in str(info.value) and len(str(info.value).splitlines()) == 1


def test_instances_that_cannot_be_terminated_either_are_named_in_the_error(aws):
    aws.fail("CreateTags", "forbidden")
    aws.fail("TerminateInstances", "forbidden")
    with pytest.raises(PlatformError) as info:
        provider(aws).submit(digits())
    message = str(info.value)
    ids = [i["InstanceId"] for r in aws.client("ec2").describe_instances()["Reservations"] for i in r["Instances"]]
    assert "could not remove" in message and all(i in message for i in ids)
    assert len(message.splitlines()) == 1
    # (the test's own clean-up: the double's account is fresh for the next test anyway)
    aws.client("ec2").terminate_instances(InstanceIds=ids)


def test_cli_submit_with_tagging_denied_exits_3_in_one_line_and_leaves_nothing_running(aws, home):
    aws.fail("CreateTags", "forbidden")
    sets = [f"--set={k}={v}" for k, v in SETS.items()]
    proc = run_cli("submit", "-p", "ec2", EXAMPLES / "digits-ddp" / "job.yaml", *sets, "--detach",
                   env=aws.env(), check=3)
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("cloudtrain: warning:")]
    assert len(errors) == 1 and errors[0].startswith("cloudtrain: error:") and "AccessDenied" in errors[0], proc.stderr
    assert "removed what this submit had made: 2 instance(s)" in errors[0]
    assert proc.stdout == ""
    assert states(aws) and set(states(aws)) == {"terminated"}
    assert "digits-ddp" not in run_cli("list", env=aws.env(), check=0).stdout  # no ledger row: nothing runs
