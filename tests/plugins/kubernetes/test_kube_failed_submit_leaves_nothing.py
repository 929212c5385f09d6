"""A Kubernetes submit that fails after it created objects removes them (issue 39, item 2): the
Secret (the job's real secret values), the launcher's ConfigMap and the job object are made one
by one, then the job is made their owner; when that last step is refused, every one of them is
deleted again before submit returns (``CloudProvider.schedule`` undoes what ``_create`` made)."""
import pytest

from cloudtrain.spec.errors import PlatformError
from test_kube_lifecycle import SECRET, kube, submit  # noqa: F401


def test_a_refused_owner_patch_deletes_the_secret_configmap_and_job(tmp_path, kube, monkeypatch, home):  # noqa: F811
    kube.fail_next.append(("PATCH", 403))  # the first PATCH: making the job the Secret's owner
    with pytest.raises(PlatformError) as info:
        submit(tmp_path, kube, monkeypatch, home)
    assert info.value.exit_code == 3 and "removed what this submit had made" in str(info.value)
    assert kube.count("POST", "/secrets") == 1 and kube.count("POST", "/pytorchjobs") == 1  # all were made...
    with kube.lock:
        left = [key for key in kube.objects if key[1] == "team-a"]
    assert left == []  # ...and none is left: no Secret holding the value, no job without its Secret
    assert SECRET not in str(info.value)
