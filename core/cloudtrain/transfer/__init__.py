"""What moves between this machine and a platform: the job's code (which files, the archive with
the launcher), object stores, storage URIs and outputs coming back."""
