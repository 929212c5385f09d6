"""The provider interface and what providers share: ``Provider``, the typed request,
``CloudProvider`` (remote platforms), the hosted (local, Docker) lifecycle, images, spot and
runtime limits."""
