"""cloudtrain plugin for Tencent Cloud TI-ONE: provider ``tione`` (extra ``tione``) and the
``cos://`` object store.

Imports no SDK: tencentcloud-sdk-python-tione and cos-python-sdk-v5 load when first needed.

What lives where:

- ``options.py``: ``TioneOptions``, the ``providers.tione`` section of a job file (pydantic).
- ``render.py``: pure (no SDK, network, clock or credentials): ``TioneRequest``, the typed
  request (the code archive's ``cos/PutObject`` and the ``CreateTrainingTask`` body, with
  ``cloudtrain.providers.request.Placeholder``s that core's ``fill`` completes at submit), its builders
  (``request``, ``build``), ``check``/``missing`` (what TI-ONE would refuse, what a submit still
  needs) and ``emulate`` (the variables TI-ONE gives each node, for local runs).
- ``provider.py``: ``TioneProvider``, lifecycle calls only: ``render_request``, ``code_store``
  (COS with the provider's credentials), ``_find_by_spec``/``_create`` (read the typed request),
  ``_describe``/``_to_status``/``_stop``/``_log_chunks``/``list``/``outputs``; core's
  ``CloudProvider`` runs the one submit pipeline.
- ``sdk.py``: the SDK: credentials (the default chain), ``TioneApi`` (a ``TioneClient`` per
  region, ``call``), and ``api_error``, the plugin's one error translator (TI-ONE's and COS's).
- ``detect.py``: the node side (standard library only): TI-ONE's topology from its variables.
- ``cosstore.py``: ``CosStore``, ``cos://BUCKET-APPID/prefix`` through the COS SDK.
- ``catalog.py`` + ``catalogs/tione.json``: the postpaid specs and prices, and their refresh.
- ``plugin.py``: the registrations (provider ``tione``, store scheme ``cos``).
"""
