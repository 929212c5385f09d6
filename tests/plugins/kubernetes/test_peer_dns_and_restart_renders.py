"""Issue 28 #1 and #3: what the Kubernetes renders say about peers' DNS records and restarts,
each pinned to the upstream source that makes it necessary."""
from cloudtrain.input.loading import job_from_dict
from cloudtrain_kubernetes import manifests as m
from conftest import EXAMPLES


def job(type_="ddp", **extra):
    data = {"name": "digits", "command": "python train.py", "image": "pytorch/pytorch:2.4.0",
            "distribution": {"type": type_, "nodes": 2}, "code": str(EXAMPLES / "digits-ddp")}
    data.update(extra)
    return job_from_dict(data)


def test_volcano_publishes_pods_before_they_are_ready():
    """Volcano's svc plugin makes the job's headless Service with publishNotReadyAddresses false
    unless given ``--publish-not-ready-addresses`` (volcano-sh/volcano pkg/controllers/job/
    plugins/svc/svc.go: addFlags, createServiceIfNotExist ``PublishNotReadyAddresses:
    sp.publishNotReadyAddresses``); without it node 0's name does not resolve until its pod is
    Ready, which a large image pull delays by minutes."""
    for type_ in ("ddp", "mpi", "ray"):
        spec = m.build_volcano(job(type_))[-1]["spec"]
        assert spec["plugins"]["svc"] == ["--publish-not-ready-addresses=true"]


def test_pytorchjob_services_cannot_publish_not_ready_pods():
    """Kept as it is, with its source: training-operator's per-replica headless Services set no
    publishNotReadyAddresses and take no option for it (kubeflow/training-operator release-1.9
    pkg/controller.v1/common/service.go CreateNewService: ``ClusterIP: "None"``, selector,
    ports).  There the launcher's wait for node 0's name (up to CLOUDTRAIN_PEER_TIMEOUT, then a
    failure naming it: tests/core/test_launch_node.py) is what covers a slow image pull."""
    objs = m.build_kubeflow(job())
    assert not [o for o in objs if o.get("kind") == "Service"]  # the operator's, not cloudtrain's


def test_pytorchjob_restarts_run_torchrun_elastic_on_every_pod():
    """Issue 28 #1.  The operator restarts only the failed pod (training-operator release-1.9
    pkg/controller.v1/common/pod.go ReconcilePods: under OnFailure "Need to restart the pod" deletes
    that pod; pkg/core/pod.go SetRestartPolicy hands OnFailure to the kubelet, which restarts
    only that container), so the pods' launchers run torchrun's elastic agent (c10d) with the
    job's restarts (CLOUDTRAIN_MAX_RESTARTS), and the operator's own PET_RDZV_ENDPOINT names the
    master: without rdzvHost it is ``<job>-worker-0`` (pkg/controller.v1/pytorch/elastic.go
    generateEnvRDZVEndpoint).  tests/e2e/test_kubeflow_restarts.py runs it."""
    spec = m.build_kubeflow(job(max_restarts=2))[-1]["spec"]
    assert spec["elasticPolicy"]["rdzvHost"] == "digits-master-0"
    for replica in spec["pytorchReplicaSpecs"].values():
        env = {e["name"]: e.get("value") for e in replica["template"]["spec"]["containers"][0]["env"]}
        assert env["CLOUDTRAIN_MAX_RESTARTS"] == "2"
        assert replica["restartPolicy"] == "OnFailure"
    static = m.build_kubeflow(job())[-1]["spec"]    # no restarts asked for: static rendezvous, no elastic agent
    assert "elasticPolicy" not in static
    for replica in static["pytorchReplicaSpecs"].values():
        assert "CLOUDTRAIN_MAX_RESTARTS" not in {e["name"] for e in replica["template"]["spec"]["containers"][0]["env"]}
    deepspeed = m.build_kubeflow(job("deepspeed", max_restarts=2))[-1]["spec"]
    assert "elasticPolicy" not in deepspeed


def test_max_restarts_where_a_restarted_pod_cannot_rejoin_is_refused_at_its_line(tmp_path):
    """Issue 28 #1, "or a refusal": on the operator's v1 kinds only the failed pod is restarted
    (pod.go ReconcilePods), so a whole-job restart holds for ddp (elastic agent) and mpi/horovod
    (the MPIJob launcher reruns mpirun over every worker), not for deepspeed, ray, none or
    ps-worker, whose restarted pod would rejoin nothing; Volcano restarts the whole job
    (``RestartJob``) for every type."""
    import pytest
    from cloudtrain.spec.errors import JobFileError
    from cloudtrain.extend.plugins import get_provider
    from conftest import write_job
    for type_ in ("deepspeed", "ray", "none", "ps-worker"):
        path = write_job(tmp_path, f"""
            name: digits
            command: python train.py
            image: pytorch/pytorch:2.4.0
            code: {EXAMPLES / 'digits-ddp'}
            distribution: {{type: {type_}, nodes: 2}}
            max_restarts: 2
        """)
        from cloudtrain.input.loading import load_job
        for provider in ("kubeflow", "eks"):
            with pytest.raises(JobFileError) as refused:
                get_provider(provider).render(load_job(path, ["providers.eks.cluster=c"], provider=provider))
            assert f"{path}:6: max_restarts" in str(refused.value) and "cannot rejoin" in str(refused.value)
        spec = m.build_volcano(job(type_, max_restarts=2))[-1]["spec"]
        assert spec["policies"][0] == {"event": "PodFailed", "action": "RestartJob"}
    for type_ in m.WHOLE_JOB_RESTARTS:
        get_provider("kubeflow").render(job(type_, max_restarts=2))
