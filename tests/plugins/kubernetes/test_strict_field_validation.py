"""Every custom object cloudtrain creates asks for server-side field validation ``Strict``
(issue 40, "Unknown CRD fields dropped silently by older operators"): an operator whose CRD lacks
a field cloudtrain renders (Trainer 2.0/2.1 have no ``spec.runtimePatches``) would otherwise
prune it in silence and run a job without cloudtrain's volumes, launcher and scheduling.

Sources: the kubernetes client's ``CustomObjectsApi.create_namespaced_custom_object`` takes
``field_validation`` ("Strict: This will fail the request with a BadRequest error if any unknown
fields would be dropped from the object", kubernetes 37.0.1 custom_objects_api.py); kube-apiserver
answers such a create with 400 BadRequest and a Status whose message is the strict decoder's
(k8s.io/apiserver pkg/endpoints/handlers/rest.go transformDecodeError: ``errors.NewBadRequest``;
kubernetes.io/docs/reference/using-api/api-concepts/#field-validation).  The loopback API server
plays that cluster (tests/doubles/kube_double.py ``unknown_fields``)."""
import pytest

from conftest import run_cli
from test_kube_lifecycle import SECRET, job_file, kube, submit  # noqa: F401 (the fake API server fixture)

KINDS = [("kubeflow", "ddp", "pytorchjobs"), ("kubeflow", "mpi", "mpijobs"), ("kubeflow", "ps-worker", "tfjobs"),
         ("volcano", "ddp", "jobs"), ("kubeflow-trainer", "ddp", "trainjobs")]


@pytest.mark.parametrize("provider,dist,plural", KINDS)
def test_every_custom_object_is_created_with_strict_field_validation(tmp_path, kube, monkeypatch, home,  # noqa: F811
                                                                     provider, dist, plural):
    submit(tmp_path, kube, monkeypatch, home, provider=provider, dist=dist)
    posts = [path for method, path in kube.calls if method == "POST" and f"/{plural}" in path]
    assert len(posts) == 1 and posts[0].endswith("?fieldValidation=Strict"), posts


def test_a_field_the_clusters_crd_lacks_fails_the_submit_in_one_line_and_leaves_nothing(tmp_path, kube,  # noqa: F811
                                                                                      home):
    kube.unknown_fields["trainjobs"] = ["spec.runtimePatches"]  # Trainer 2.1's TrainJob CRD
    path = job_file(tmp_path, kube, "kubeflow-trainer")
    proc = run_cli("submit", "-p", "kubeflow-trainer", path, "--detach",
                   env={"CT_KUBE_SECRET": SECRET, "KUBECONFIG": kube.config_path})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 3, proc.stderr
    problem = [line for line in lines if "TrainJob team-a/kjob" in line]
    assert len(problem) == 1 and 'unknown field "spec.runtimePatches"' in problem[0], proc.stderr
    assert "upgrade the operator" in problem[0]
    assert kube.count("POST", "/trainjobs") == 1          # it was asked once, refused...
    with kube.lock:
        left = [key for key in kube.objects if key[1] == "team-a"]
    assert left == []                                     # ...and the Secret and ConfigMaps made before are gone
    assert SECRET not in proc.stderr + proc.stdout


def test_without_strict_the_double_prunes_as_an_older_crd_does(tmp_path, kube):  # noqa: F811
    """The double's other half: a create that does not ask for Strict loses the field in silence,
    which is what the test above guards against (so the double cannot pass it by refusing always)."""
    from kubernetes import client
    kube.unknown_fields["trainjobs"] = ["spec.runtimePatches"]
    api = client.CustomObjectsApi(client.ApiClient(client.Configuration(
        host=kube.url, api_key={"authorization": "Bearer " + kube.token})))
    body = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "old"},
            "spec": {"trainer": {"numNodes": 1}, "runtimePatches": [{"manager": "x"}]}}
    made = api.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "team-a", "trainjobs", body)
    assert "runtimePatches" not in made["spec"] and made["spec"]["trainer"] == {"numNodes": 1}
