"""The hooks a cloudtrain plugin can implement.  Hooks register things; classes behave.

A plugin is a module (or object) named by an entry point in the ``cloudtrain`` group whose
functions carry ``@hookimpl`` and one of the names below; pluggy checks the names and the
parameters when the plugin loads (a misspelt hook is an error).  The ``register`` hooks fill
``cloudtrain.extend.registry``'s tables with ``"module:attr"`` strings: nothing is imported until it
is used.  Every hook is documented in docs/plugins.md (a test checks it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Union

import pluggy

if TYPE_CHECKING:
    from typing import Protocol

    from ..spec.job import JobSpec
    from ..providers.provider import Provider, Rendered

    class RegisterProvider(Protocol):
        """``register(ProviderClass)`` or ``register("pkg.module:ProviderClass", name="x")``."""

        def __call__(self, target: Union[str, type], name: Optional[str] = None) -> None: ...

    class RegisterStore(Protocol):
        """``register("pkg.module:StoreClass", scheme="s3")``."""

        def __call__(self, target: str, scheme: str) -> None: ...

    class RegisterCatalog(Protocol):
        """``register("pkg.module:refresh", provider="x")``."""

        def __call__(self, target: str, provider: str) -> None: ...

hookspec = pluggy.HookspecMarker("cloudtrain")
hookimpl = pluggy.HookimplMarker("cloudtrain")


@hookspec
def cloudtrain_register_providers(register: RegisterProvider) -> None:
    """Register this plugin's provider classes.

    The one hook every plugin must implement.  Import no cloud SDK here (nor the provider's
    module: register it by name): a provider imports its SDK lazily, when it first talks to
    the platform.

    :param register: call ``register("package.module:ProviderClass", name="provider")`` for each
        provider, so that the module is imported only when that provider is used (what the
        built-in plugins do), or ``register(ProviderClass)`` with the class itself.  A name
        another plugin registered with another class is an error naming both plugins.
    """


@hookspec
def cloudtrain_register_stores(register: RegisterStore) -> None:
    """Register the object stores this plugin reads and writes.

    Providers of other plugins then reach a store by its scheme (a Kubernetes job's
    ``code_store: s3://...``, ``cloudtrain outputs``) without importing this plugin.

    :param register: call ``register("package.module:StoreClass", scheme="s3")`` for each store
        (a subclass of ``cloudtrain.transfer.objectstore.ObjectStore``, imported only when a URL of that
        scheme is used).  A scheme another plugin registered is an error naming both.
    """


@hookspec
def cloudtrain_register_catalogs(register: RegisterCatalog) -> None:
    """Register the functions that rebuild a provider's instance catalog, when they are not the
    provider class's ``catalog_refresh`` (``cloudtrain catalog refresh -p PROVIDER``).

    :param register: call ``register("package.module:refresh", provider="name")``; the function
        is imported only by a refresh, and called with ``out_dir=`` (a directory, or None for
        the plugin's own catalog folder); it returns the files it wrote.
    """


@hookspec
def cloudtrain_validate_job(job: JobSpec, provider: Provider) -> Optional[List[str]]:
    """Extra lint rules (organisation policy), run by ``validate``, ``render`` and ``submit``.

    Every implementation runs; any problem stops the command with exit code 2, before anything
    is sent.

    :param job: the validated job.
    :param provider: the provider the job is for (``provider.name``).
    :return: a list of problems, one sentence each (or None: no problem).
    """


@hookspec
def cloudtrain_amend_request(rendered: Rendered) -> None:
    """Amend a rendered request in place before it is shown or sent (add labels or tags to
    ``rendered.artifacts[i].content``), so that a dry run shows exactly what will be sent.

    :param rendered: the request ``render`` built (``rendered.provider``, ``rendered.job``,
        ``rendered.artifacts``).
    """


@hookspec
def cloudtrain_before_submit(rendered: Rendered) -> None:
    """Called just before a rendered request is sent (audit, notifications).

    :param rendered: the request about to be sent.  Raising an exception stops the submission.
    """


@hookspec
def cloudtrain_after_submit(rendered: Rendered, handle: str) -> None:
    """Called after the platform accepted the job.

    :param rendered: the request that was sent.
    :param handle: the job's handle, ``PROVIDER://ID``.
    """
