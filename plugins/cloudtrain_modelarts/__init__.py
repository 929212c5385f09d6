"""cloudtrain plugin for Huawei Cloud ModelArts: providers ``modelarts`` and ``modelarts-lite``
(extra ``modelarts``).

Imports no SDK: the Huawei Cloud SDKs and the kubernetes client load when a provider needs them.
"""
