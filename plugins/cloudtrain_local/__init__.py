"""The ``local`` provider: N emulated nodes as process groups on this machine.

The pluggy registration lives in ``cloudtrain_local.plugin``; this package imports nothing,
so ``cloudtrain launch`` can import ``cloudtrain_local.detect`` with the standard library only.
"""
