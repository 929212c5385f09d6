"""cloudtrain plugin for Azure ML: provider ``azure`` (extra ``azure``), Azure ML command jobs
through azure-ai-ml's ``MLClient``.

Imports no SDK: azure-ai-ml and azure-identity load when the provider first needs them.

What lives where:

- ``options.py``: ``AzureOptions`` (the ``providers.azure`` section) and ``DataRef`` (a named
  input or output).
- ``render.py``: pure builders (no SDK, network or clock): ``AzureRequest``, the typed request,
  i.e. the command job YAML that ``azure.ai.ml.load_job`` reads (printed as the ``azureml/job``
  artifact), and ``AzureRequest.submitted``: that YAML named and tagged for the spec hash, with
  the staged code and a cluster's InfiniBand presets; ``build`` and the pieces it is made of
  (environment variables, node command, distribution, data inputs/outputs).
- ``checks.py``: what azure refuses in a job (exit 2 at the field), what render cannot check
  offline (warnings), and what a compute cluster read at submit cannot give.
- ``provider.py``: ``AzureProvider``, the lifecycle calls of core's ``CloudProvider`` pipeline:
  ``render_request``, ``_find_by_spec`` (the job named for the spec), ``_create`` (stage the code,
  ``load_job``, ``jobs.create_or_update``), ``_describe``/``_to_status``, ``_stop``,
  ``_log_chunks``, ``list``, ``outputs``.
- ``sdk.py``: the SDK side: ``make_ml_client`` (a workspace by its three names or its
  config.json), ``DefaultCredential`` (no credentials anywhere vs refused), job ids
  (``SUB/RG/WS/NAME``), ``load_job``, the run-history log files, and ``azure_errors``, the one
  translator of Azure's errors (``PlatformError`` exit 3 with request id and fix; the SDK's
  refusal of the user's input, ``BadInput`` exit 2).
- ``detect.py``: the node side (standard library only): topology from Azure ML's variables.
- ``infiniband.py``: VM sizes' InfiniBand and the NCCL/UCX presets of ``network.rdma``.
- ``prices.py``: the catalog's price refresh (Azure Retail Prices API); ``catalogs/``: the VM sizes.
- ``plugin.py``: the entry point's hooks: registers the provider and its catalog's price refresh.
"""
