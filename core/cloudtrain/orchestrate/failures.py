"""What kind of failure ended an attempt, read from the platform's own words.

``classify(provider, status)`` -> ``(kind, words)``: ``kind`` is one of ``preemption``,
``capacity``, ``node-failure``, ``hang`` (the kinds ``restart_on`` names), ``exit-code`` (the
user's code exited with ``status.exit_code``), or ``other``; ``words`` is the part of the
platform's message it was read from.  The platform is asked first: if it says the nodes were
taken away or could not be had, that is the kind, whatever the code exited with; only when it
says nothing of the kind is the user's exit code consulted (SkyPilot's managed jobs do the same:
``sky/jobs/recovery_strategy.py``, "check the cluster status before the user's exit code").

Each table entry names where the platform writes those words.
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

PREEMPTION, CAPACITY, NODE_FAILURE, HANG, EXIT_CODE, OTHER = (
    "preemption", "capacity", "node-failure", "hang", "exit-code", "other")
KINDS = (PREEMPTION, CAPACITY, NODE_FAILURE, HANG)
# restarts that spend the preemption budget (the platform took the capacity); the others spend
# the failure budget (docs/controller.md, "Budgets")
PLATFORM_KINDS = frozenset({PREEMPTION, CAPACITY})

# The launcher's own words (core/cloudtrain/launch/stall.py writes STALLED as the node's reason).
STALLED = "stalled: no output for"

# provider -> ((regex over the status message, kind), ...), first match wins
WORDS: Dict[str, Tuple[Tuple[str, str], ...]] = {
    # SageMaker DescribeTrainingJob: FailureReason "CapacityError: Unable to provision requested ML
    # compute capacity" (API reference, DescribeTrainingJob > FailureReason); managed spot's
    # SecondaryStatus "Interrupted" ("the job stopped because the managed spot training instances
    # were interrupted", SecondaryStatusTransition > Status); "InternalServerError" is the one
    # failure its RetryStrategy retries (RetryStrategy reference): a node the platform lost.
    "sagemaker": ((r"InsufficientCapacityError|CapacityError", CAPACITY),
                  (r"\bInterrupted\b|spot.{0,40}interrupt", PREEMPTION),
                  (r"InternalServerError", NODE_FAILURE)),
    # EC2 DescribeInstances: Instance.StateReason.Code (EC2 API reference, StateReason data type):
    # Server.SpotInstanceTermination / Server.SpotInstanceShutdown (spot reclaimed),
    # Server.InsufficientInstanceCapacity, Server.InternalError (hardware failure).
    "ec2": ((r"Server\.SpotInstance(?:Termination|Shutdown)", PREEMPTION),
            (r"Server\.InsufficientInstanceCapacity", CAPACITY),
            (r"Server\.InternalError", NODE_FAILURE)),
    # Azure ML job error codes (Azure ML REST JobBase error.code; "Troubleshoot job failures"):
    # a low-priority node's preemption is "NodePreempted"/"LowPriorityNodePreempted", capacity
    # refusals are "AllocationFailed"/"QuotaExceeded"/"ZonalAllocationFailed", a node lost is
    # "NodeFailure"/"NodeUnusable"/"DiskFull" of the node.
    "azure": ((r"(?:LowPriority)?NodePreempted|[Pp]reempt", PREEMPTION),
              (r"AllocationFailed|ZonalAllocationFailed|QuotaExceeded|SkuNotAvailable", CAPACITY),
              (r"NodeFailure|NodeUnusable|NodeNotReady", NODE_FAILURE)),
    # TI-ONE DescribeTrainingTask: TrainingTaskDetail.FailureReason (tencentcloud-sdk-python
    # tione/v20211111/models.py); the resource refusals are the error codes of errorcodes.py.
    "tione": ((r"ResourceInsufficient|BillingStatusResourceInsufficient", CAPACITY),
              (r"[Pp]reempt|SpotReclaim", PREEMPTION),
              (r"NodeFault|NodeLost|NodeFailure", NODE_FAILURE)),
    # Kubernetes pod condition DisruptionTarget (k8s.io/api/core/v1 types.go,
    # DisruptionTarget: PreemptionByScheduler, DeletionByTaintManager, EvictionByEvictionAPI,
    # DeletionByPodGC, TerminationByKubelet).
    "kubernetes": ((r"DisruptionTarget|PreemptionByScheduler|EvictionByEvictionAPI", PREEMPTION),
                   (r"DeletionByTaintManager|DeletionByPodGC|TerminationByKubelet|NodeLost", NODE_FAILURE),
                   (r"FailedScheduling|Insufficient (?:cpu|memory|nvidia)", CAPACITY)),
    # The local and Docker supervisors (core/cloudtrain/runtime/supervise.py failure_reason):
    # "node 1 was killed by signal 9" is a node lost; the docker supervisor's "OOMKilled".
    "local": ((r"was killed by signal", NODE_FAILURE),),
    "docker": ((r"was killed by signal|OOMKilled", NODE_FAILURE),),
}
WORDS.update({name: WORDS["kubernetes"] for name in ("kubeflow", "kubeflow-trainer", "volcano", "eks",
                                                      "modelarts-lite")})
_EXIT = re.compile(r"exited with code (\d+)")


def classify(provider: str, message: str, exit_code: Optional[int] = None) -> Tuple[str, str]:
    """``(kind, words)`` of a failure ``provider`` reported with ``message`` (see the module)."""
    text = message or ""
    if STALLED in text:
        return HANG, text[text.index(STALLED):][:120]
    for pattern, kind in WORDS.get(provider, ()):
        found = re.search(pattern, text)
        if found:
            return kind, found.group(0)
    code = exit_code
    if code is None:
        found_code = _EXIT.search(text)
        code = int(found_code.group(1)) if found_code else None
    if code is not None and code > 0:
        return EXIT_CODE, str(code)
    return OTHER, text.splitlines()[0][:120] if text else ""


def covered(kind: str, words: str, restart_on) -> bool:
    """Whether ``restart_on`` (the job's list: kind names and ``ExitCodes``) covers this failure."""
    if kind in KINDS:
        return kind in [k for k in restart_on if isinstance(k, str)]
    if kind == EXIT_CODE and words.isdigit():
        return any(int(words) in getattr(k, "exit_codes", ()) for k in restart_on)
    return False
