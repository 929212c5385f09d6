"""cloudtrain plugin for AWS: providers ``sagemaker``, ``eks`` and ``ec2`` (extra ``aws``).

Imports no SDK: boto3 and the kubernetes client load when a provider first needs them.
"""
