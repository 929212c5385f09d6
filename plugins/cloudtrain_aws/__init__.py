"""cloudtrain's AWS plugin: the ``sagemaker`` and ``ec2`` providers, ``eks`` (the kubernetes
plugin's Kubeflow provider with AWS's auth and EFA), the ``s3://`` object store, and their node side.

What lives where (sagemaker and ec2 share each file; one shape for both):

- ``options.py``: the pydantic settings, ``SageMakerOptions`` (``providers.sagemaker``) and
  ``Ec2Options`` (``providers.ec2``).
- ``render.py``: pure builders (no SDK, no network, no clock): the typed requests
  ``SageMakerRequest`` (CreateTrainingJob's body, the code upload, the Secrets Manager reads) and
  ``Ec2Request`` (RunInstances, the placement group, node 0's key script, the nodes' script,
  SendCommand; what EC2 is asked at submit decided here as typed fields), and the helpers both
  use (S3 URIs, job names, secrets' ids and variable names as environment values).
- ``ec2_node.sh``: every EC2 node's script as a template; shellcheck passes it as it is;
  ``render.node_script`` fills it with ``cloudtrain.providers.request.fill`` (each job value one
  shell-quoted word, ``#@ block`` lines the lines the job's settings make).
- ``sagemaker.py``, ``ec2.py``: the providers (``CloudProvider``s): option checks and the
  platform's calls only (``render_request``, ``_find_by_spec``, ``_create``, ``_describe``,
  ``_to_status``, ``_stop``, ``_release``, ``_log_chunks``, ``list``, ``outputs``); the submit
  pipeline (spec hash, code shipping, fill) is core's.
- ``common.py``: ``AwsProvider``, their base: regions and ``region/name`` handles, the checks
  before a submit, the code archive's S3 store, EFA facts from EC2, CloudWatch Logs reads.
- ``sdk.py``: boto3 sessions and clients (retries, regions, credentials) and the plugin's one
  error translator (``AwsClients.api``).
- ``s3store.py``: the ``s3://`` object store (``cloudtrain.transfer.objectstore``).
- ``instances.py``, ``catalogs/``, ``catalog_refresh.py``: the instance catalogs, the EFA presets,
  their refresh from AWS's price lists; ``limits.py``: botocore's limits a SageMaker request is
  checked against offline.
- ``detect.py``: SageMaker's node side; ``node.py``: the node prelude both providers ship (job id,
  Secrets Manager, sshd for mpirun, ec2's storage ``copy``); standard library only.
- ``eks.py``, ``eks_detect.py``: Amazon EKS.
- ``plugin.py``: the hooks that register all of the above.

No module imports boto3 at import time: ``cloudtrain render`` never pays for the SDK.
"""
