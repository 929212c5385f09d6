"""The hooks a cloudtrain plugin can implement.  Hooks register things; classes behave.

Every hook is documented in docs/plugins.md (a test checks it).
"""
from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("cloudtrain")
hookimpl = pluggy.HookimplMarker("cloudtrain")


@hookspec
def cloudtrain_register_providers(register):
    """Register this plugin's provider classes: call ``register(ProviderClass)`` for each, or
    ``register("package.module:ProviderClass", name="provider")`` so that the module is imported
    only when that provider is used (what the built-in plugins do).

    The one hook every plugin must implement.  Import no cloud SDK here: a provider imports
    its SDK lazily, when it first talks to the platform.
    """


@hookspec
def cloudtrain_register_stores(register):
    """Register the object stores this plugin reads and writes: call
    ``register("package.module:StoreClass", scheme="s3")`` for each (a subclass of
    ``cloudtrain.objectstore.ObjectStore``, imported only when a URL of that scheme is used).
    Providers of other plugins then reach the store by its scheme (a Kubernetes job's
    ``code_store: s3://...``, ``cloudtrain outputs``) without importing this plugin."""


@hookspec
def cloudtrain_validate_job(job, provider):
    """Extra lint rules (organisation policy).  Return a list of problem strings (or None).

    Every implementation runs; any problem stops the submission with exit code 2.
    """


@hookspec
def cloudtrain_amend_request(rendered):
    """Amend a ``Rendered`` request in place (e.g. add labels or tags to
    ``rendered.artifacts[i].content``) before it is shown or sent, so that a dry run shows
    exactly what will be sent."""


@hookspec
def cloudtrain_before_submit(rendered):
    """Called just before a rendered request is sent (audit, notifications).  Raising stops it."""


@hookspec
def cloudtrain_after_submit(rendered, handle):
    """Called after the platform accepted the job; ``handle`` is ``PROVIDER://ID``."""
