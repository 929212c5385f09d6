"""A test plugin in the shape of any provider: one folder, one entry point.

Platform ``fakeone`` injects TI-ONE's DDP environment (seed 000): its ``WORLD_SIZE`` counts
*nodes* and ``RANK`` is the *node* index, unlike PyTorch's.  Used to prove ``--emulate`` and
``cloudtrain launch`` detection end to end without the real ``tione`` plugin.

- ``plugin``: the pluggy registration (what the entry point names; here
  ``CLOUDTRAIN_PLUGINS=ct_fakeone.plugin`` with tests/support on ``PYTHONPATH``);
- ``provider``: the provider class (imported when first used);
- ``detect``: the node side, standard library only (``PLATFORMS``).

This ``__init__`` imports nothing, so that a node can import ``ct_fakeone.detect`` alone.
"""
