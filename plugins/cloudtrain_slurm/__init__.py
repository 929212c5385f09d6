"""cloudtrain plugin for Slurm: provider ``slurm`` (extra ``slurm``, no SDK: Slurm's own commands).

What lives where:

- ``options.py``: ``SlurmOptions``, the ``providers.slurm`` section of a job file (pydantic).
- ``render.py``: pure (no command run, no clock): ``SlurmRequest``, the typed request (the batch
  script exactly as ``sbatch`` reads it, where it is written, the code archive's place), its
  builder ``request``, ``check`` (what Slurm would refuse) and ``emulate`` (the variables srun
  gives each node, for ``--emulate slurm``).
- ``provider.py``: ``SlurmProvider``, lifecycle calls only: ``_find_by_spec``/``_create`` (sbatch,
  cancelled again if anything fails after it), ``_describe`` (squeue, then scontrol, then sacct,
  then the job's own files), ``_to_status``, ``_stop`` (scancel), ``_log_chunks`` (the output
  file), ``list``, ``outputs``; core's ``CloudProvider`` runs the one submit pipeline.
- ``sdk.py``: ``Cluster``, Slurm's commands run here or on a login node over the system ssh
  (one connection reused), ``WorkdirStore`` (the code archive onto the shared file system),
  the parsers of the commands' output and ``slurm_error``, the plugin's one error translator.
- ``detect.py``: the node side (standard library only): Slurm's topology from srun's variables.
- ``plugin.py``: the registration (provider ``slurm``).
"""
