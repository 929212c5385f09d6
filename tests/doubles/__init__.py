"""The test doubles: one module per platform, ``<platform>_double.py`` (its fake endpoint),
``<platform>_fixtures.py`` (its pytest fixtures), ``<platform>_loopback.py`` (a cloudtrain plugin that
points the real provider at the double, for subprocesses).  Imported as ``doubles.<module>``
(pyproject's pytest ``pythonpath`` puts tests/ on the path)."""
