"""Registers the kubernetes plugin's providers (entry point ``kubernetes = "cloudtrain_kubernetes.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: a provider's module (and its SDK) loads only when that provider is used
    register("cloudtrain_kubernetes.provider:KubeflowProvider", name="kubeflow")
    register("cloudtrain_kubernetes.provider:KubeflowTrainerProvider", name="kubeflow-trainer")
    register("cloudtrain_kubernetes.provider:VolcanoProvider", name="volcano")
