"""The contract every registered provider must pass.

render is deterministic and offline, secrets are masked, the envelope is well formed,
unknown options are rejected, and environment() / detect() round-trip.  Parametrized over
every provider the plugin manager knows (plus the ``fakeone`` test plugin), so a new plugin
is covered the moment it registers.
"""
import json
import re
import socket

import pytest
import yaml

from cloudtrain import plugins
from cloudtrain.errors import JobFileError
from cloudtrain.launch import detectors
from cloudtrain.loading import job_from_dict
from cloudtrain.provider import Cluster, Provider, State
from conftest import EXAMPLES
from platform_cases import SEMANTICS, cases_for

PROVIDERS = sorted(plugins.providers())
SECRET_VALUE = "s3cr3t-contract-value-7f9a"
KIND = re.compile(r"^[a-z0-9-]+/[A-Za-z0-9-]+$")


def job_for(provider: str, **extra):
    data = {
        "name": "contract-job", "command": "python train.py --epochs 1", "image": "example/train:1",
        "distribution": {"type": "ddp", "nodes": 3, "procs_per_node": 2},
        "env": {"OMP_NUM_THREADS": "1"}, "secrets": {"API_TOKEN": {"from_env": "CT_CONTRACT_SECRET"}},
        # the digits example, not `.` (pytest's directory: the whole repository, which would not
        # fit the Kubernetes providers' ConfigMap)
        "code": str(EXAMPLES / "digits-ddp"),
    }
    data.update(extra)
    return job_from_dict(data)


@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("render must not touch the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_builtin_and_test_plugins_are_registered():
    assert "local" in PROVIDERS and "fakeone" in PROVIDERS


@pytest.mark.parametrize("name", PROVIDERS)
def test_class_contract(name):
    cls = plugins.get_provider_class(name)
    assert issubclass(cls, Provider)
    assert cls.name == name and re.match(r"^[a-z][a-z0-9-]*$", name)
    assert cls.extra and isinstance(cls.sdk_modules, tuple)
    assert cls.Options.model_config.get("extra") == "forbid", "Options must reject unknown keys"
    for raw, state in cls.states.items():
        assert isinstance(state, State), f"{raw!r} maps to {state!r}, not a neutral State"
    assert cls.map_state("SOMETHING-NEW") is State.UNKNOWN


@pytest.mark.parametrize("name", PROVIDERS)
def test_render_is_deterministic_and_offline(name, offline, monkeypatch):
    monkeypatch.setenv("CT_CONTRACT_SECRET", SECRET_VALUE)
    provider = plugins.get_provider(name)
    first = provider.render(job_for(name)).to_json()
    second = plugins.get_provider(name).render(job_for(name)).to_json()
    assert first == second


@pytest.mark.parametrize("name", PROVIDERS)
def test_envelope_is_well_formed(name):
    rendered = plugins.get_provider(name).render(job_for(name))
    envelope = json.loads(rendered.to_json())
    assert set(envelope) == {"provider", "job", "artifacts"}
    assert envelope["provider"] == name and envelope["job"] == "contract-job"
    assert envelope["artifacts"], "a render must produce at least one artifact"
    for artifact in envelope["artifacts"]:
        assert set(artifact) == {"kind", "name", "content"}
        assert KIND.match(artifact["kind"]), artifact["kind"]
        assert isinstance(artifact["name"], str) and artifact["name"]
    docs = [d for d in yaml.safe_load_all(rendered.to_yaml())]
    assert len(docs) == len(envelope["artifacts"])


@pytest.mark.parametrize("name", PROVIDERS)
def test_secrets_are_masked(name, monkeypatch):
    monkeypatch.setenv("CT_CONTRACT_SECRET", SECRET_VALUE)
    rendered = plugins.get_provider(name).render(job_for(name))
    for text in (rendered.to_json(), rendered.to_yaml(), str(rendered)):
        assert SECRET_VALUE not in text
    assert "API_TOKEN" not in rendered.to_json() or "***" in rendered.to_json()


@pytest.mark.parametrize("name", PROVIDERS)
def test_unknown_options_are_rejected(name, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(f"name: opts\ncommand: python t.py\nproviders:\n  {name}:\n    no_such_option: 1\n")
    from cloudtrain.loading import load_job
    job = load_job(path)
    with pytest.raises(JobFileError) as info:
        plugins.get_provider(name).render(job)
    assert str(info.value).startswith(f"{path}:5: providers.{name}.no_such_option: unknown field")


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("dist", [("ddp", 3, 2), ("ddp", 1, 1), ("mpi", 2, 4)])
def test_environment_detect_round_trip(name, dist):
    cls = plugins.get_provider_class(name)
    kind, nodes, procs = dist
    job = job_for(name, distribution={"type": kind, "nodes": nodes, "procs_per_node": procs})
    cluster = Cluster(hosts=[f"host-{i}" for i in range(nodes)], master_port=23456)
    for index in range(nodes):
        env = cls.environment(job, index, cluster)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        topo = cls.detect(env)
        assert topo is not None, f"{name}.detect() does not recognise its own environment"
        assert (topo.node_rank, topo.num_nodes, topo.master_port) == (index, nodes, 23456)
        assert topo.hosts == cluster.hosts
        # auto-detection in the node picks this platform, not the generic detector
        auto = detectors.detect(dict(env, CLOUDTRAIN_DETECTORS=cls.detectors_variable()))
        assert auto.platform == name
        assert auto.node_rank == index


@pytest.mark.parametrize("name,case", [(n, c) for n in PROVIDERS for c in cases_for(n)],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_platform_semantics(name, case):
    environ, expected = case
    topo = plugins.get_provider_class(name).detect(environ)
    assert topo is not None
    for field, value in expected.items():
        assert getattr(topo, field) == value, f"{field}: {getattr(topo, field)!r} != {value!r}"


def test_tione_semantics_are_pinned():
    """TI-ONE's case runs today through a test double; the real plugin inherits it."""
    assert [n for n, target in SEMANTICS.items() if target == "tione" and n in PROVIDERS]
    assert cases_for("tione")
