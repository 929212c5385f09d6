"""render is deterministic and offline, secrets are masked, the envelope is well formed, unknown
options are refused at their line, and ``environment()``/``detect()`` round-trip."""
import json
import re

import pytest
import yaml

from cloudtrain.extend import plugins
from cloudtrain.spec.errors import JobFileError
from cloudtrain.launch import detectors
from cloudtrain.input.loading import load_job
from cloudtrain.providers.provider import Cluster, Provider, State
from cloudtrain.testing.jobs import SECRET_SOURCE, SECRET_VALUE, contract_job

KIND = re.compile(r"^[a-z0-9-]+/[A-Za-z0-9-]+$")


def test_class_contract(cloudtrain_provider):
    name = cloudtrain_provider
    cls = plugins.get_provider_class(name)
    assert issubclass(cls, Provider)
    assert cls.name == name and re.match(r"^[a-z][a-z0-9-]*$", name)
    assert cls.extra and isinstance(cls.sdk_modules, tuple)
    assert cls.Options.model_config.get("extra") == "forbid", "Options must reject unknown keys"
    for raw, state in cls.states.items():
        assert isinstance(state, State), f"{raw!r} maps to {state!r}, not a neutral State"
    assert cls.map_state("SOMETHING-NEW") is State.UNKNOWN


def test_render_is_deterministic_and_offline(cloudtrain_provider, code_dir, offline, monkeypatch):
    monkeypatch.setenv(SECRET_SOURCE, SECRET_VALUE)
    first = plugins.get_provider(cloudtrain_provider).render(contract_job(code_dir)).to_json()
    second = plugins.get_provider(cloudtrain_provider).render(contract_job(code_dir)).to_json()
    assert first == second


def test_envelope_is_well_formed(cloudtrain_provider, code_dir):
    rendered = plugins.get_provider(cloudtrain_provider).render(contract_job(code_dir))
    envelope = json.loads(rendered.to_json())
    assert set(envelope) == {"provider", "job", "artifacts"}
    assert envelope["provider"] == cloudtrain_provider and envelope["job"] == "contract-job"
    assert envelope["artifacts"], "a render must produce at least one artifact"
    for artifact in envelope["artifacts"]:
        assert set(artifact) == {"kind", "name", "content"}
        assert KIND.match(artifact["kind"]), artifact["kind"]
        assert isinstance(artifact["name"], str) and artifact["name"]
    assert len(list(yaml.safe_load_all(rendered.to_yaml()))) == len(envelope["artifacts"])


def test_secrets_are_masked(cloudtrain_provider, code_dir, monkeypatch):
    monkeypatch.setenv(SECRET_SOURCE, SECRET_VALUE)
    rendered = plugins.get_provider(cloudtrain_provider).render(contract_job(code_dir))
    for text in (rendered.to_json(), rendered.to_yaml(), str(rendered)):
        assert SECRET_VALUE not in text
    assert "API_TOKEN" not in rendered.to_json() or "***" in rendered.to_json()


def test_unknown_options_are_refused_at_their_line(cloudtrain_provider, tmp_path):
    name = cloudtrain_provider
    path = tmp_path / "job.yaml"
    path.write_text(f"name: opts\ncommand: python t.py\nproviders:\n  {name}:\n    no_such_option: 1\n")
    with pytest.raises(JobFileError) as info:
        plugins.get_provider(name).render(load_job(path))
    assert str(info.value).startswith(f"{path}:5: providers.{name}.no_such_option: unknown field")


@pytest.mark.parametrize("dist", [("ddp", 3, 2), ("ddp", 1, 1), ("mpi", 2, 4)])
def test_environment_detect_round_trip(cloudtrain_provider, code_dir, dist):
    name = cloudtrain_provider
    cls = plugins.get_provider_class(name)
    kind, nodes, procs = dist
    job = contract_job(code_dir, distribution={"type": kind, "nodes": nodes, "procs_per_node": procs})
    cluster = Cluster(hosts=[f"host-{i}" for i in range(nodes)], master_port=23456)
    for index in range(nodes):
        env = cls.environment(job, index, cluster)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        topo = cls.detect(env)
        assert topo is not None, f"{name}.detect() does not recognise its own environment"
        assert (topo.node_rank, topo.num_nodes, topo.master_port) == (index, nodes, 23456)
        assert topo.hosts == cluster.hosts
        # with the request's CLOUDTRAIN_DETECTORS, the node picks this platform, not the generic one
        auto = detectors.detect(dict(env, CLOUDTRAIN_DETECTORS=cls.detectors_variable()))
        assert auto.platform == name
        assert auto.node_rank == index
