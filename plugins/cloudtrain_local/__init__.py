"""The ``local`` provider: N emulated nodes as process groups on this machine.

The pluggy registration lives in ``cloudtrain_local.plugin``.  Its nodes see the generic
platform (``cloudtrain.launch.generic``), or the platform ``--emulate`` names.
"""
