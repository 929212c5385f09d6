"""cloudtrain plugin for Tencent Cloud TI-ONE: provider ``tione`` (extra ``tione``).

Imports no SDK: tencentcloud-sdk-python-tione loads when the provider first needs it.
"""
