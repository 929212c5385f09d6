"""The in-node launcher (standard library only, Python >= 3.8).  Entry point: ``main``."""
from .main import main  # noqa: F401
