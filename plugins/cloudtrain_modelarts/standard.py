"""Where ``plugin.py`` registers ``modelarts`` today (``cloudtrain_modelarts.standard:ModelartsProvider``):
the provider is ``provider.py``'s.  Delete this module once ``plugin.py`` names
``cloudtrain_modelarts.provider:ModelartsProvider`` (``plugin.py`` is the registry's to change)."""
from .provider import ModelartsProvider

__all__ = ["ModelartsProvider"]
