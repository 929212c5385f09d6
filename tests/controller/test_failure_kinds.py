"""The platform's words -> the kind of failure (cloudtrain.orchestrate.failures), each case in the
words its source gives (cited beside each), and what restart_on covers.  The platform is asked
first: its words win over an exit code in the same message."""
import pytest

from cloudtrain.orchestrate.failures import classify, covered
from cloudtrain.spec.job import ExitCodes

DEFAULT = ["preemption", "capacity", "node-failure", "hang"]


@pytest.mark.parametrize("provider,message,kind", [
    # EC2 API reference, StateReason data type: the codes of a stopped/terminated instance
    ("ec2", "Server.SpotInstanceTermination: Spot instance termination", "preemption"),
    ("ec2", "Server.InsufficientInstanceCapacity: insufficient capacity", "capacity"),
    ("ec2", "Server.InternalError: internal error on launch", "node-failure"),
    # SageMaker DescribeTrainingJob FailureReason / SecondaryStatus
    ("sagemaker", "CapacityError: Unable to provision requested ML compute capacity. Please retry using a "
                  "different ML instance type.", "capacity"),
    ("sagemaker", "InternalServerError: We encountered an internal error. Please try again.", "node-failure"),
    # botocore's sagemaker model, SecondaryStatus of a Stopped managed spot job whose
    # MaxWaitTimeInSeconds (waiting for Spot capacity plus run time) ran out
    ("sagemaker", "MaxWaitTimeExceeded: The job stopped because it exceeded the maximum allowed wait time.",
     "preemption"),
    # Azure ML run history's RunDetails.error of a run that lost a node (the azure provider's status)
    ("azure", "ServiceError: NodeFailure: Node tvmps_0001 of cluster gpu-cluster became unusable", "node-failure"),
    # Kubernetes pod condition type DisruptionTarget (k8s.io/api/core/v1)
    ("kubeflow", "pod digits-worker-1: DisruptionTarget: PreemptionByScheduler", "preemption"),
    # TI-ONE error codes (tencentcloud/tione/v20211111/errorcodes.py)
    ("tione", "ResourceInsufficient: 资源不足。", "capacity"),
    # the local supervisor's reason for a node ended by a signal (runtime/supervise.py failure_reason)
    ("local", "node 1 was killed by signal 9; see /runs/x/node-1.log", "node-failure"),
    # the launcher's stall (launch/stall.py): every provider
    ("azure", "node 0 exited with code 1: stalled: no output for 30m; see log", "hang"),
    ("local", "node 0 rank 0 exited with code 3: ValueError: bad batch", "exit-code"),
])
def test_the_platforms_words_give_the_kind(provider, message, kind):
    assert classify(provider, message)[0] == kind


def test_the_platform_is_asked_before_the_exit_code():
    assert classify("ec2", "rank 0 exited with code 3; Server.SpotInstanceTermination", 3)[0] == "preemption"
    assert classify("ec2", "rank 0 exited with code 3", 3) == ("exit-code", "3")


def test_restart_on_covers_its_kinds_and_only_the_exit_codes_it_names():
    assert covered("preemption", "x", DEFAULT) and covered("hang", "x", DEFAULT)
    assert not covered("exit-code", "3", DEFAULT)
    assert covered("exit-code", "3", ["preemption", ExitCodes(exit_codes=[3, 75])])
    assert not covered("exit-code", "4", ["preemption", ExitCodes(exit_codes=[3, 75])])
    assert not covered("other", "", DEFAULT)
