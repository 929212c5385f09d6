"""``cloudtrain launch`` without ``--platform``: a node of the provider's platform is recognised
from what the node sees alone (no ``CLOUDTRAIN_DETECTORS`` from a request), by the installed
plugins' detectors, with the right rank and node count, for each distribution type it renders."""
import pytest

from cloudtrain.extend import plugins
from cloudtrain.spec.errors import BadInput
from cloudtrain.launch import detectors
from cloudtrain.providers.provider import Cluster
from cloudtrain.testing.jobs import contract_job, required_settings

GENERIC = {"pytorch"}  # the plain-PyTorch guess: a platform's node must be recognised as more than that


@pytest.mark.parametrize("kind,nodes", [("ddp", 3), ("mpi", 2), ("ps-worker", 3)])
def test_every_node_is_detected_without_naming_its_platform(cloudtrain_provider, code_dir, kind, nodes):
    cls = plugins.get_provider_class(cloudtrain_provider)
    job = contract_job(code_dir, distribution={"type": kind, "nodes": nodes, "procs_per_node": 2},
                       resources={"gpus_per_node": 1})
    try:
        plugins.get_provider(cloudtrain_provider).render(
            contract_job(code_dir, distribution={"type": kind, "nodes": nodes, "procs_per_node": 2},
                         providers={cloudtrain_provider: required_settings(cloudtrain_provider)}))
    except BadInput as exc:
        if str(getattr(exc, "field", "") or "").startswith("distribution"):
            return  # a type the provider does not run: no node of it to recognise
        raise
    cluster = Cluster(hosts=[f"10.0.0.{i + 1}" for i in range(nodes)], master_port=23456)
    known = {name for name, _ in detectors.registered({})} | {cloudtrain_provider}
    for index in range(nodes):
        env = {k: v for k, v in cls.environment(job, index, cluster).items() if k != "CLOUDTRAIN_DETECTORS"}
        topo = detectors.detect(env)
        assert topo.platform in known and topo.platform not in GENERIC, topo.platform
        assert (topo.node_rank, topo.num_nodes) == (index, nodes)
