"""The one registry (cloudtrain.extend.registry): a table per kind of "module:attr" strings with the extra
that provides each; a duplicate name is an error naming both plugins; the built-in lists and the
install hints come from the cloudtrain distribution's own entry points; nothing is imported
until it is used."""
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import cli_env

from cloudtrain import hookimpl
from cloudtrain.extend import plugins, registry
from cloudtrain.spec.errors import BadInput

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture
def fresh():
    plugins.reset()
    yield plugins
    plugins.reset()
    plugins._disabled.clear()


def registered_by_pyproject_plugins(hook: str):
    """(name, target) every plugin module pyproject's entry points name registers through ``hook``."""
    import importlib
    found = []
    for module in PYPROJECT["project"]["entry-points"]["cloudtrain"].values():
        fn = getattr(importlib.import_module(module), hook, None)
        if fn is not None:
            fn(register=lambda target, name=None, **kw: found.append((name or next(iter(kw.values())), target)))
    return sorted(found)


def test_builtin_providers_are_exactly_what_the_entry_points_plugins_register():
    """A new built-in provider (its folder, entry point and extra) is in the list with nothing else
    edited, so the contract tests parametrized over it cover it."""
    expected = [name for name, _ in registered_by_pyproject_plugins("cloudtrain_register_providers")]
    assert registry.builtin_providers() == expected
    assert len(expected) >= 12 and expected == sorted(set(expected))


def test_each_entry_point_is_named_after_the_extra_that_carries_its_sdks():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(PYPROJECT["project"]["entry-points"]["cloudtrain"]) <= set(extras)


def test_a_provider_or_store_name_registered_twice_is_an_error_naming_both(fresh):
    class Other:
        @hookimpl
        def cloudtrain_register_stores(self, register):
            register("ct_other.store:OtherS3", scheme="s3")

    plugins.register_plugin(Other(), name="otherstores")
    with pytest.raises(registry.DuplicateRegistration) as caught:
        plugins.tables()
    message = str(caught.value)
    assert "'s3'" in message and "aws" in message and "otherstores" in message
    assert "cloudtrain_aws.s3store:S3Store" in message and "ct_other.store:OtherS3" in message
    assert isinstance(caught.value, BadInput)  # exit 2, one line


def test_a_duplicate_within_one_table_is_refused():
    table = registry.Table("provider")
    table.add(registry.Entry("provider", "x", "a.b:X", "one"))
    table.add(registry.Entry("provider", "x", "a.b:X", "again"))  # the same target: one registration
    with pytest.raises(registry.DuplicateRegistration, match="by both one .* and two"):
        table.add(registry.Entry("provider", "x", "c.d:X", "two"))


def test_install_hints_come_from_the_table():
    """Each built-in store scheme's and provider's hint is the extra its plugin's entry point names."""
    eps = PYPROJECT["project"]["entry-points"]["cloudtrain"]
    import importlib
    for extra, module in eps.items():
        schemes = []
        fn = getattr(importlib.import_module(module), "cloudtrain_register_stores", None)
        if fn:
            fn(register=lambda target, scheme, found=schemes: found.append(scheme))
        for scheme in schemes:
            assert registry.install_hint("store", scheme) == f"pip install 'cloudtrain[{extra}]'"
    assert registry.install_hint("provider", "ec2") == "pip install 'cloudtrain[aws]'"
    assert registry.install_hint("store", "gs") == ""


def test_installed_providers_carry_their_extra_without_importing_their_class(fresh):
    info = plugins.providers()["volcano"]
    assert info.extra == "kubernetes" and info._cls is None


def test_the_registry_imports_no_provider_store_or_sdk_module():
    code = ("import sys; from cloudtrain.extend import plugins, registry; plugins.tables(); "
            "registry.builtin_providers(); "
            "print(sorted(m for m in sys.modules if (m.startswith('cloudtrain_') and '.' in m "
            "and not m.endswith('.plugin')) or m.split('.')[0] in ('boto3', 'kubernetes', 'docker', 'azure')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(plugins=False))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_hookspecs_are_typed_and_documented():
    import inspect
    from cloudtrain.extend import hookspecs
    hooks = [fn for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("cloudtrain_")]
    assert len(hooks) >= 7
    for fn in hooks:
        signature = inspect.signature(fn)
        untyped = [p for p in signature.parameters.values() if p.annotation is inspect.Parameter.empty]
        assert not untyped and signature.return_annotation is not inspect.Signature.empty, fn.__name__
        assert all(f":param {p}:" in fn.__doc__ for p in signature.parameters), fn.__name__


def test_every_package_pyproject_lists_py_typed_for_has_the_marker():
    packages = [p for p in (REPO / "core").iterdir() if (p / "__init__.py").exists()]
    packages += [p for p in (REPO / "plugins").iterdir() if (p / "__init__.py").exists()]
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["*"]
    assert [p.name for p in packages if not (p / "py.typed").exists()] == []


def test_a_built_in_providers_install_hint_is_the_tables():
    for entry in registry.builtin()["provider"].entries():
        assert entry.load().install_hint() == entry.install_hint == f"pip install 'cloudtrain[{entry.extra}]'"
