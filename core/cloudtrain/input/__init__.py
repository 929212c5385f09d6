"""The user's input around a job file: reading it (``--set`` overrides, errors at the line),
account settings and profiles, ``$CLOUDTRAIN_HOME``, secrets, what no field may hold."""
