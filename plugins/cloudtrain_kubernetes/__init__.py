"""cloudtrain's ``kubernetes`` plugin: Kubeflow (PyTorchJob / MPIJob / TFJob), Kubeflow Trainer v2
(TrainJob, ``trainjob.py``) and Volcano Jobs.

``cloudtrain_kubernetes.manifests`` builds the manifests (pure, plain dicts, no SDK); the
``eks`` and ``modelarts-lite`` providers reuse it.  This package imports no cloud SDK.
"""
