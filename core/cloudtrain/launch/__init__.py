"""The in-node launcher (standard library only, Python >= 3.8).  Entry point: ``main.main``
(``python -m cloudtrain.launch``).  Importing the package imports nothing else, so that the
pieces the client side uses (``topology``, ``detectors``) come without the launcher itself."""
