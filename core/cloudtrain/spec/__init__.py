"""The job file's model: ``JobSpec`` and its field types, durations, accelerator names, the neutral
job states, YAML in and out, errors and problems at a job field, credential shapes."""
