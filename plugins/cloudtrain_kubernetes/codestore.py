"""How a Kubernetes job's code reaches its pods: in the request (the code ConfigMap) when it fits,
else through an object store (``providers.<p>.code_store``) and a time-limited URL.

- ``code_payload``: decides at render (pure, offline) -- ``code_shipping: auto`` (the default)
  puts an archive of at most ``INLINE_CODE_LIMIT`` in the ConfigMap and a larger one in the
  store; ``configmap`` / ``store`` force one way.  Too large with no store is exit 2 naming
  ``code_store``; a store whose plugin or SDK is missing is exit 2 naming the ``pip install``.
- ``upload_artifact``: what the render shows of the upload (``s3/PutObject``, ``obs/PutObject``).
- ``ship`` (``Provider.ship_code``) and ``fetch_url``: at submit, the content-addressed upload
  through the object-store registry, then the presigned GET URL that goes into the Secret.

The provider supplies ``code_store_schemes`` (which schemes its pods may fetch from) and
``code_store_settings(options)`` (region, endpoint: the store's constructor arguments).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from cloudtrain.errors import BadInput
from cloudtrain.job import JobSpec
from cloudtrain.provider import Artifact, Rendered

from . import manifests as m

if TYPE_CHECKING:
    from .provider import KubernetesProvider, PodOptions

# S3's SigV4 presigned URLs last at most 7 days (X-Amz-Expires <= 604800): long enough for a
# job that waits in a queue, and the default.
MAX_URL_SECONDS = 7 * 24 * 3600
EXAMPLES = {"s3": "s3://my-bucket/cloudtrain", "obs": "obs://my-bucket/cloudtrain"}


def example(provider: "KubernetesProvider") -> str:
    return EXAMPLES.get(provider.code_store_schemes[0], f"{provider.code_store_schemes[0]}://my-bucket/cloudtrain")


def code_payload(provider: "KubernetesProvider", job: JobSpec, options: "PodOptions") -> Optional[m.CodePayload]:
    """The job's archive and where it travels (None with ``code: null``); exit 2 when it cannot."""
    if job.code is None:
        return None
    from cloudtrain import shipping
    try:
        data = shipping.code_archive(job)
    except FileNotFoundError:
        raise provider.job_error(job, ("code",), f"the code directory {job.code_path} does not exist; fix `code` "
                                                 "(relative to the job file)") from None
    sha256 = data.sha256
    fits = len(data) <= m.INLINE_CODE_LIMIT
    how = options.code_shipping
    if how == "configmap" or (how == "auto" and fits):
        if not fits:
            raise too_large(provider, job, len(data), forced=True)
        return m.CodePayload(sha256, len(data))
    if not options.code_store:
        if how == "store":
            raise provider.job_error(job, ("providers", provider.name, "code_shipping"),
                                     f"is store, but providers.{provider.name}.code_store is not set; set it to an "
                                     f"object store the pods can reach, e.g. {example(provider)}")
        raise too_large(provider, job, len(data))
    prefix = store_prefix(provider, job, options)
    from cloudtrain.objectstore import code_url
    return m.CodePayload(sha256, len(data), str(code_url(prefix, data)))


def too_large(provider: "KubernetesProvider", job: JobSpec, size: int, forced: bool = False) -> BadInput:
    name = provider.name
    way = (f"set providers.{name}.code_shipping to auto (the default) with providers.{name}.code_store"
           if forced else f"set providers.{name}.code_store to an object store the pods can reach "
                          f"(e.g. {example(provider)}) and the archive is uploaded there")
    return provider.job_error(job, ("code",),
        f"the code archive of {job.code_path} is {size / 1024:.0f} KiB packed; a Kubernetes ConfigMap carries at most "
        f"{m.INLINE_CODE_LIMIT // 1024} KiB here (the API server's limit is 1 MiB); {way}, leave files out with a "
        ".cloudtrainignore, or build the code into the image and set code: null")


def store_prefix(provider: "KubernetesProvider", job: JobSpec, options: "PodOptions"):
    """``code_store`` parsed, its scheme one this provider's pods fetch from, its store (plugin
    and SDK) installed: all offline."""
    from cloudtrain.objectstore import ObjectUrl, usable_store_class
    loc = ("providers", provider.name, "code_store")
    try:
        prefix = ObjectUrl.parse(options.code_store, f"providers.{provider.name}.code_store")
    except BadInput as exc:
        raise provider.job_error(job, loc, str(exc)) from None
    if prefix.scheme not in provider.code_store_schemes:
        takes = ", ".join(f"{s}://" for s in provider.code_store_schemes)
        raise provider.job_error(job, loc, f"{options.code_store} is a {prefix.scheme}:// store; {provider.name} ships "
                                           f"code through {takes} stores: use one, e.g. {example(provider)}")
    try:
        usable_store_class(prefix.scheme)
    except BadInput as exc:
        raise provider.job_error(job, loc, str(exc)) from None
    return prefix


def upload_artifact(code: Optional[m.CodePayload]) -> List[Artifact]:
    """``[<scheme>/PutObject]`` when the code goes through a store (the render shows where)."""
    if code is None or code.inline:
        return []
    from cloudtrain.objectstore import ObjectUrl
    url = ObjectUrl.parse(code.url)
    return [Artifact(f"{url.scheme}/PutObject", "code", {"Bucket": url.bucket, "Key": url.key,
                                                         "ContentType": "application/gzip"})]


def stored_url(rendered: Rendered) -> Optional[str]:
    """The object URL the rendered request uploads the code to (None: it travels inline)."""
    for a in rendered.artifacts:
        if a.kind.endswith("/PutObject") and a.name == "code":
            return f"{a.kind.partition('/')[0]}://{a.content['Bucket']}/{a.content['Key']}"
    return None


def open_code_store(provider: "KubernetesProvider", rendered: Rendered, url):
    """The store for ``url`` with the provider's settings (region, endpoint)."""
    from cloudtrain.objectstore import open_store
    settings = provider.code_store_settings(rendered.options)
    return open_store(url, **{k: v for k, v in settings.items() if v is not None})


def ship(provider: "KubernetesProvider", rendered: Rendered, store=None) -> List[str]:
    """Upload the archive where the render said (once: content-addressed); the URL as a list."""
    target = stored_url(rendered)
    if target is None:
        where = "reads it from the image (code: null)" if rendered.job.code is None else \
            "sends it inside its request (the code ConfigMap)"
        raise BadInput(f"{provider.name} {where} for this job; there is nothing to stage: set "
                       f"providers.{provider.name}.code_shipping: store (with code_store) to upload the code to an "
                       "object store instead")
    from cloudtrain import shipping
    from cloudtrain.objectstore import ObjectUrl, upload_once
    url = ObjectUrl.parse(target)
    data = shipping.code_archive(rendered.job)  # uploaded from its file
    if not url.key.endswith("/" + data.sha256 + ".tar.gz"):
        raise BadInput(f"the code in {rendered.job.code_path} changed after the job was rendered; render or submit again")
    upload_once(store or open_code_store(provider, rendered, url), url, data)
    return [target]


def fetch_url(provider: "KubernetesProvider", rendered: Rendered) -> Optional[str]:
    """Upload the code (as ``ship``) and return a GET URL for it that lasts ``code_url_expires``;
    None when the code travels in the request."""
    target = stored_url(rendered)
    if target is None:
        return None
    from cloudtrain.objectstore import ObjectUrl
    url = ObjectUrl.parse(target)
    store = open_code_store(provider, rendered, url)
    ship(provider, rendered, store)
    return store.presign(url, rendered.options.code_url_expires or MAX_URL_SECONDS)
