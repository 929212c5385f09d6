"""How cloudtrain is extended: the hook specifications, the plugin manager and the registry of
providers, object stores, platforms and catalogs."""
