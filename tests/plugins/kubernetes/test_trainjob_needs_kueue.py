"""A TrainJob with a queue is created with ``spec.suspend: true`` (Kueue resumes it when it admits
it: kubeflow/trainer examples/yaml/03-kueue-integration.yaml, "created suspended; Kueue
unsuspends it"); nothing else resumes it, so on a cluster whose API discovery lists no
``kueue.x-k8s.io`` group the submit stops before creating anything."""
import pytest

from cloudtrain.spec.errors import PlatformError
from test_kube_lifecycle import kube  # noqa: F401 (the fake API server fixture)
from test_trainjob_lifecycle import submit

QUEUED = "    queue: gpu-queue"


def test_a_queued_trainjob_on_a_cluster_without_kueue_is_not_created(tmp_path, kube, monkeypatch, home):
    kube.api_groups.remove("kueue.x-k8s.io")
    with pytest.raises(PlatformError, match=r"serves no kueue.x-k8s.io API.*would never start"):
        submit(tmp_path, kube, monkeypatch, extra=QUEUED)
    assert kube.count("POST", r"") == 0 and kube.count("GET", r"^/apis/?$") == 1


def test_with_kueue_or_without_a_queue_the_trainjob_is_created(tmp_path, kube, monkeypatch, home):
    submit(tmp_path, kube, monkeypatch, extra=QUEUED)
    assert kube.find("trainjobs", "team-a", "kjob")["spec"]["suspend"] is True
    kube.api_groups.remove("kueue.x-k8s.io")
    kube.objects.clear()
    submit(tmp_path, kube, monkeypatch)            # not suspended: no discovery needed
    assert kube.find("trainjobs", "team-a", "kjob") is not None and kube.count("GET", r"^/apis/?$") == 1
