"""The in-node launcher (standard library only, Python >= 3.8).  Entry point: ``main.main``
(``python -m cloudtrain.launch``).  Importing the package imports nothing else but ``report``
(standard library only: a training script's ``from cloudtrain.launch import report``), so that
the pieces the client side uses (``topology``, ``detectors``) come without the launcher itself."""
from .report import flush as flush_report, report

__all__ = ["report", "flush_report"]
