"""cloudtrain plugin for Azure ML: provider ``azure`` (extra ``azure``).

Imports no SDK: azure-ai-ml and azure-identity load when the provider first needs them.
"""
