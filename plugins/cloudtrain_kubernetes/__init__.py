"""cloudtrain's ``kubernetes`` plugin: Kubeflow training-operator jobs (``kubeflow``: PyTorchJob /
MPIJob / TFJob), Kubeflow Trainer v2 (``kubeflow-trainer``: TrainJob) and Volcano Jobs
(``volcano``) on any cluster a kubeconfig reaches; ``eks`` (cloudtrain_aws.eks) and
``modelarts-lite`` (cloudtrain_modelarts.lite) build on it.

What lives where:

- ``options.py``: the settings (pydantic): ``PodOptions`` (what every job's pods get, on any
  Kubernetes-based provider), ``KubeOptions`` (a cluster through a kubeconfig) and the
  per-platform models (``KubeflowOptions``, ``VolcanoOptions``, ``KubeflowTrainerOptions``;
  ``TrainerOptions`` and ``QueueSchedulerOption`` are mixed into ``eks``'s too).
- ``render.py``: pure (no SDK, no network, no clock): the typed request ``KubeRequest`` (the job
  object, the launcher's ConfigMap, the job's Secret, and the code: ``InlineCode`` in a ConfigMap
  or ``StoredCode`` through an object store, whose ``code_upload`` core ships) and what builds it:
  ``kube_request``, ``manifest_options``, ``code_payload`` (where the code travels), the Trainer
  runtime checks.
- ``manifests.py``, ``trainjob.py``: the pure builders of the objects themselves (plain dicts):
  ``build_kubeflow``, ``build_volcano``, ``trainjob.build_trainjob``, the Secret, the ConfigMaps,
  the spec-hash stamp; ``names.py``: Kubernetes' rules for names and labels;
  ``gpu_products.py`` (+ ``catalogs/``): the node labels of a GPU model.
- ``provider.py``: the lifecycle: ``KubernetesProvider`` (a ``CloudProvider``) and
  ``KubeflowProvider``, ``VolcanoProvider``, ``KubeflowTrainerProvider``: ``render_request``,
  ``_find_by_spec``, ``_create`` (the request's objects with the secrets' values, the code's bytes
  or a time-limited URL of the shipped archive), ``_describe``, ``_to_status``, ``_stop``,
  ``_log_chunks``, ``list``, ``outputs``; its docstring lists the hooks a provider built on it
  overrides.
- ``sdk.py``: the ``kubernetes`` client (imported only when a cluster is reached): a client from
  a kubeconfig or the pod's service account, the typed APIs, creating and owning Secrets and
  ConfigMaps, and the plugin's one error translator, ``api_error``.
- ``podlogs.py``: each pod's log, streamed; ``podoutputs.py``: ``cloudtrain outputs`` (a pod that
  copies the output claim out).
- ``detect.py``, ``trainer_detect.py``: the node side (standard library only, Python 3.8+, shipped
  in the launcher bundle): what a pod's environment says about the job.
- ``plugin.py``: the registrations (the four providers).

render and validate import no cloud SDK.
"""
