"""The ``kubernetes`` client, imported here only when a cluster is reached: a client from a
kubeconfig (or the pod's service account), the typed APIs a provider calls, the core objects a
submit creates (Secrets, ConfigMaps), and THE one error translator (``api_error``)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple

from cloudtrain.spec.errors import MissingCredentials, PlatformError

# The core objects a job owns, by the suffix of their CoreV1Api calls (create_namespaced_<suffix>).
SECRET = "secret"
CONFIG_MAP = "config_map"


def api_error(exc, doing: str) -> PlatformError:
    """A kubernetes ApiException as one line: what failed, the server's reason, the fix."""
    status, reason, message = getattr(exc, "status", None), getattr(exc, "reason", ""), ""
    try:
        message = json.loads(exc.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        pass
    fixes: Dict[Optional[int], str] = {
        400: "an unknown field is one this cluster's CRD lacks (cloudtrain creates with strict field validation): "
             "its operator is older than the one cloudtrain renders for; upgrade the operator (see the provider's "
             "page in docs/providers), or leave out the option that renders that field",
        401: "check the kubeconfig's credentials",
        403: "ask for RBAC rights on these resources",
        404: "is the operator's CRD installed in this cluster?",
        422: "the cluster refused the object (its CRD schema or an admission webhook); fix the field it names"}
    fix = fixes.get(status, "check the cluster and retry")
    return PlatformError(f"{doing} failed: {status} {reason}{': ' + message if message else ''}; {fix}")


def api_exception():
    """The client's ``ApiException`` class (what ``api_error`` translates)."""
    from kubernetes.client.exceptions import ApiException
    return ApiException


def no_kubeconfig(path: str) -> None:
    """``MissingCredentials`` when no file of ``path`` (``$KUBECONFIG``: ``:``-separated) exists
    and this is no pod (the kubernetes client would find no cluster and no credentials)."""
    files = [os.path.expanduser(p) for p in path.split(os.pathsep) if p]
    if any(os.path.exists(f) for f in files):
        return
    where = f"KUBECONFIG={path}: no such file" if os.environ.get("KUBECONFIG") else \
        f"{path}: no such file, KUBECONFIG is not set"
    raise MissingCredentials("Kubernetes", f"{where}, the in-cluster service account: not in a pod",
                             "export KUBECONFIG=PATH of your cluster's kubeconfig (or write it to ~/.kube/config); "
                             "`kubectl config current-context` checks it")


# The pod's service account token, which kubernetes' in-cluster config reads
# (kubernetes/config/incluster_config.py: SERVICE_TOKEN_FILENAME).
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def offline_credentials(kubeconfig: Optional[str] = None) -> Tuple[bool, str]:
    """``(found, where)`` of what the kubernetes client would connect with, offline for ``cloudtrain
    doctor``: the ``kubeconfig`` option, else ``$KUBECONFIG`` (``:``-separated) or ``~/.kube/config``
    (kubernetes/config/kube_config.py: KUBE_CONFIG_DEFAULT_LOCATION), else the in-cluster service
    account.  Names and files, never values."""
    from cloudtrain.input.credsources import file_at
    if kubeconfig:
        return (bool(file_at(kubeconfig)), f"the kubeconfig option: {kubeconfig}"
                + ("" if file_at(kubeconfig) else ": no such file"))
    named = os.environ.get("KUBECONFIG")
    files = [p for p in (named or "~/.kube/config").split(os.pathsep) if p]
    found = [str(file_at(p)) for p in files if file_at(p)]
    if found:
        return True, ("KUBECONFIG: " if named else "") + ", ".join(found)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.isfile(SERVICE_ACCOUNT_TOKEN):
        return True, "the in-cluster service account"
    where = f"KUBECONFIG={named}" if named else "~/.kube/config (KUBECONFIG is not set)"
    return False, f"none found (looked in: {where}, the in-cluster service account); export KUBECONFIG"


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG") and \
        not os.path.exists(os.path.expanduser("~/.kube/config"))


def kubeconfig_client(kubernetes, target: Dict[str, Any]):
    """A new ``ApiClient`` for ``target`` (``kubeconfig``, ``context``): from that kubeconfig, else
    ``$KUBECONFIG`` or ``~/.kube/config`` (read now, not when the client was imported), else the
    pod's service account."""
    from kubernetes import config
    try:
        if target.get("kubeconfig") or target.get("context") or not in_cluster():
            path = target.get("kubeconfig") or os.environ.get("KUBECONFIG") or "~/.kube/config"
            if not target.get("kubeconfig"):
                no_kubeconfig(path)
            return config.new_client_from_config(config_file=path, context=target.get("context"))
        config.load_incluster_config()
        return kubernetes.client.ApiClient()
    except (config.ConfigException, OSError) as exc:
        raise PlatformError(f"cannot load the kubeconfig ({exc}); fix that file or its context, or name "
                            "another with KUBECONFIG") from None


def apis(api_client) -> Tuple[Any, Any]:
    """(CustomObjectsApi, CoreV1Api) over ``api_client``."""
    from kubernetes import client
    return client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)


def served_groups(api_client) -> Optional[set]:
    """The API groups the cluster serves (``kubectl api-versions``); None when the credentials may
    not ask."""
    from kubernetes import client
    try:
        return {g.name for g in client.ApisApi(api_client).get_api_versions().groups or []}
    except api_exception():
        return None


def ns_name(obj: dict) -> Tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def put(core, suffix: str, obj: dict) -> dict:
    """Create the core object ``obj`` (``suffix``: ``SECRET`` or ``CONFIG_MAP``); one left over from
    an earlier job of this name is taken over (replaced)."""
    ns, name = ns_name(obj)
    try:
        getattr(core, f"create_namespaced_{suffix}")(ns, obj)
    except api_exception() as exc:
        if exc.status != 409:
            raise
        getattr(core, f"replace_namespaced_{suffix}")(name, ns, obj)
    return obj


def delete_core(core, suffix: str, obj: dict) -> None:
    """Delete the core object ``obj`` that ``put`` made (``suffix``: ``SECRET`` or ``CONFIG_MAP``)."""
    ns, name = ns_name(obj)
    getattr(core, f"delete_namespaced_{suffix}")(name, ns)


def own(core, owned: List[Tuple[str, dict]], job: dict) -> None:
    """Make ``job`` the owner of the ``owned`` (suffix, object)s: deleting it deletes them."""
    ref = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": job["metadata"]["name"],
           "uid": job["metadata"].get("uid"), "blockOwnerDeletion": False}
    if not ref["uid"]:
        return
    for suffix, obj in owned:
        ns, name = ns_name(obj)
        getattr(core, f"patch_namespaced_{suffix}")(name, ns, {"metadata": {"ownerReferences": [ref]}})


# Server-side field validation on every create of a custom object: an unknown field is refused
# with 400 BadRequest ("strict decoding error: unknown field ...") instead of being dropped in
# silence, as an older operator's CRD would drop a field its version lacks (Trainer 2.0/2.1 have
# no spec.runtimePatches).  The kubernetes client's CustomObjectsApi.create_namespaced_custom_object
# takes ``field_validation`` (kubernetes 37.0.1, kubernetes/client/api/custom_objects_api.py: "Strict:
# This will fail the request with a BadRequest error if any unknown fields would be dropped from the
# object"); the API server honours it since Kubernetes 1.25 (beta, on by default; GA in 1.27, KEP-2885
# server-side unknown field validation; kubernetes.io/docs/reference/using-api/api-concepts/#field-validation).
FIELD_VALIDATION = "Strict"


def create_custom(custom, resource: Tuple[str, str, str], ns: str, body: dict) -> Any:
    """Create the custom object ``body`` (``resource``: group, version, plural) with strict
    server-side field validation (``FIELD_VALIDATION``)."""
    group, version, plural = resource
    return custom.create_namespaced_custom_object(group, version, ns, plural, body,
                                                  field_validation=FIELD_VALIDATION)


def get_custom(custom, resource: Tuple[str, str, str], ns: str, name: str) -> Optional[dict]:
    """The custom object (``resource``: group, version, plural), None when there is none."""
    group, version, plural = resource
    try:
        return custom.get_namespaced_custom_object(group, version, ns, plural, name)
    except api_exception() as exc:
        if exc.status == 404:
            return None
        raise
