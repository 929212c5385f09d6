"""The plugin manager: entry points, check_pending, disabling, SDK presence without import."""
import sys
from pathlib import Path

import pluggy
import pytest

from cloudtrain import hookimpl
from cloudtrain.extend import plugins
from cloudtrain.spec.errors import UnknownProvider
from cloudtrain.providers.provider import NoOptions
from cloudtrain_local.provider import LocalProvider


@pytest.fixture
def fresh_manager():
    plugins.reset()
    yield plugins
    plugins.reset()
    plugins._disabled.clear()


def test_local_is_registered_through_the_entry_point_group(fresh_manager):
    from importlib.metadata import entry_points
    assert "cloudtrain_local.plugin" in [ep.value for ep in entry_points(group="cloudtrain")]
    info = plugins.providers()["local"]
    assert info.cls is LocalProvider and info.plugin == "local"


def test_a_misspelled_hook_is_caught_by_check_pending(fresh_manager):
    class Typo:
        @hookimpl
        def cloudtrain_register_provider(self, register):  # missing "s"
            pass

    pm = plugins.get_plugin_manager()
    pm.register(Typo(), name="typo")
    with pytest.raises(pluggy.PluginValidationError):
        pm.check_pending()


def test_disable_blocks_a_plugin(fresh_manager):
    plugins.disable("local")
    assert "local" not in plugins.providers()
    with pytest.raises(UnknownProvider, match="unknown provider 'local'"):
        plugins.get_provider_class("local")


def test_two_plugins_claiming_one_provider_name_is_an_error(fresh_manager):
    class Other:
        @hookimpl
        def cloudtrain_register_providers(self, register):
            register(type("Clash", (LocalProvider,), {"name": "local"}))

    plugins.register_plugin(Other(), name="other")
    with pytest.raises(Exception, match="registered by both"):
        plugins.providers()


def test_sdk_presence_is_found_without_importing_it():
    fake = type("P", (LocalProvider,), {"name": "p", "sdk_modules": ("antigravity", "no_such_sdk_xyz"),
                                        "Options": NoOptions})
    info = plugins.ProviderInfo("p", fake, "test")
    assert info.sdk_missing() == ["no_such_sdk_xyz"]
    assert "antigravity" not in sys.modules  # importing it would open a web browser


def test_validate_hook_problems_stop_the_job(fresh_manager, tmp_path):
    class Policy:
        @hookimpl
        def cloudtrain_validate_job(self, job, provider):
            if job.distribution.nodes > 1 and provider.name == "local":
                return ["policy: local jobs may use one node only"]

    plugins.register_plugin(Policy(), name="policy")
    from cloudtrain.spec.errors import BadInput
    from cloudtrain.input.loading import job_from_dict
    job = job_from_dict({"name": "p", "command": "c", "distribution": {"nodes": 2}})
    from cloudtrain import api
    with pytest.raises(BadInput, match="policy: local jobs may use one node only"):
        api.render(job, "local")
    with pytest.raises(BadInput, match="policy: local jobs may use one node only"):
        api.validate(job, "local")
    # the hooks are the api layer's (as torchx's Runner's): the provider alone knows no policy
    plugins.get_provider("local").render(job)


def test_amend_hook_changes_what_is_shown(fresh_manager):
    class Labels:
        @hookimpl
        def cloudtrain_amend_request(self, rendered):
            for a in rendered.artifacts:
                a.content["env"]["TEAM"] = "vision"

    plugins.register_plugin(Labels(), name="labels")
    from cloudtrain.input.loading import job_from_dict
    from cloudtrain import api
    provider = plugins.get_provider("local")
    rendered = api.render(job_from_dict({"name": "p", "command": "c", "distribution": {"nodes": 2}}), provider)
    assert "TEAM: vision" in rendered.to_yaml()
    # what is sent is what was shown: the amendment survives, only the run's dir and port change
    specs = provider.runtime_specs(rendered, Path("/runs/p-1"), 40000)
    assert [s["env"]["TEAM"] for s in specs] == ["vision", "vision"]
    assert specs[1]["env"]["CLOUDTRAIN_MASTER_PORT"] == "40000"
    assert specs[1]["cwd"] == "/runs/p-1/node-1/code"
    assert specs[1]["env"]["CLOUDTRAIN_JOB_ID"] == "p-1"


def test_a_missing_sdk_names_the_extra_to_install():
    from cloudtrain.spec.errors import MissingExtra
    fake = type("P", (LocalProvider,), {"name": "p", "extra": "pextra"})
    with pytest.raises(MissingExtra, match=r"provider 'p' needs the 'no_such_sdk_xyz' package, which is not "
                                           r"installed; install it with: pip install 'cloudtrain\[pextra\]'"):
        fake.require_sdk("no_such_sdk_xyz")
    third = type("Q", (LocalProvider,), {"name": "q", "install_hint_text": "pip install cloudtrain-q"})
    with pytest.raises(MissingExtra, match="install it with: pip install cloudtrain-q$"):
        third.require_sdk("no_such_sdk_xyz")


def test_list_goes_on_past_a_provider_that_cannot_list(fresh_manager, home):
    from cloudtrain.api import list_jobs
    from cloudtrain.spec.errors import MissingExtra

    class Broken(LocalProvider):
        name = "broken"

        def list(self):
            raise MissingExtra("broken", "pip install broken-sdk", "broken_sdk")

    class Plugin:
        @hookimpl
        def cloudtrain_register_providers(self, register):
            register(Broken)

    plugins.register_plugin(Plugin(), name="broken-plugin")
    seen = []
    assert list_jobs(on_error=lambda name, exc: seen.append(name)) == []
    assert seen == ["broken"]
    with pytest.raises(MissingExtra):
        list_jobs("broken")


def test_plugins_named_in_the_environment_load_once(fresh_manager, monkeypatch):
    monkeypatch.setenv("CLOUDTRAIN_PLUGINS", "cloudtrain_local.plugin,ct_fakeone.plugin")
    assert {"local", "fakeone"} <= set(plugins.providers())


def test_a_provider_registered_by_name_is_imported_only_when_used():
    import subprocess
    from conftest import cli_env
    code = ("import sys; from cloudtrain.extend import plugins; assert 'docker' in plugins.providers(); "
            "plugins.get_provider_class('local'); print(sorted(m for m in sys.modules if m.endswith('.provider')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env()).stdout
    assert "cloudtrain_local.provider" in out and "cloudtrain_docker.provider" not in out


def test_a_provider_registered_under_the_wrong_name_is_an_error(fresh_manager):
    class Liar:
        @hookimpl
        def cloudtrain_register_providers(self, register):
            register("cloudtrain_local.provider:LocalProvider", name="notlocal")

    plugins.register_plugin(Liar(), name="liar")
    with pytest.raises(Exception, match="registered as provider 'notlocal' but calls itself 'local'"):
        plugins.get_provider_class("notlocal")


def test_list_without_a_provider_asks_no_cloud(fresh_manager, home):
    from cloudtrain.api import list_jobs

    class Cloud(LocalProvider):
        name = "somecloud"
        local_state = False

        def list(self):
            raise AssertionError("a cloud provider was asked without -p")

    class Plugin:
        @hookimpl
        def cloudtrain_register_providers(self, register):
            register(Cloud)

    plugins.register_plugin(Plugin(), name="cloud-plugin")
    assert list_jobs() == []
    with pytest.raises(AssertionError, match="without -p"):
        list_jobs("somecloud")
