"""cloudtrain plugin for Huawei Cloud ModelArts: providers ``modelarts`` (ModelArts Standard
training jobs) and ``modelarts-lite`` (a Volcano Job with ranktable routing on a Lite pool's CCE
cluster), and the ``obs://`` object store (extra ``modelarts``).

What lives where:

- ``options.py``: the settings: ``ModelartsOptions`` (``providers.modelarts``), ``ObsData``,
  ``LiteVolume``.
- ``render.py``: pure builders (no SDK, network, clock or credentials).  ``modelarts``:
  ``ModelartsRequest`` (the ``CreateTrainingJobRequest`` body and the code's ``CodeUpload`` to
  ``<store>/cloudtrain-code/<code-digest>/code/code.tar.gz``), ``build``, the render checks,
  ``submitted_body`` (spec-hash name, secrets).  ``modelarts-lite``: ``build_lite`` and its start
  line, reshaping the kubernetes plugin's ``build_volcano`` into Huawei's ranktable-routing Job.
- ``provider.py``: ``ModelartsProvider``, lifecycle calls only (core's ``CloudProvider.schedule``
  ships the code through ``code_store`` and fills the placeholders); the SDK's ``Job`` model is
  built strictly in ``_create``, before the create call; job ids ``<region>/<id>[/<task>]``.
- ``lite.py``: ``ModelartsLiteProvider`` (a ``VolcanoProvider``: the kubernetes plugin's
  lifecycle) and ``LiteOptions``; kept apart so ``modelarts`` never loads the kubernetes plugin.
- ``sdk.py``: the Huawei Cloud SDKs: credentials, regions, clients (ModelArts, CCE), strict
  request models, and the plugin's one error translator (``refused``/``unreachable``:
  ``api_errors`` for SDK exceptions, ``obs_errors``/``obs_result`` for OBS).
- ``detect.py``: the node side (standard library only, shipped with the launcher): detectors and
  the emulated environments of both platforms.
- ``obsstore.py``: ``ObsStore``, the ``obs://`` object store (esdk-obs-python).
- ``catalog.py`` (+ ``catalogs/modelarts.json``): flavors and dedicated-pool flavors, refreshed
  through ``show_training_job_flavors``.
- ``lint.py``: pure checks of the job's own scripts (ranktable routing forbids ``mp.spawn``).
- ``plugin.py``: the registrations (providers ``modelarts``, ``modelarts-lite``; store ``obs``).

Imports no SDK: the Huawei Cloud SDKs and the kubernetes client load when a provider needs them.
"""
