"""The scheduler side: effective rules compiled into Slurm objects, synced, checked for drift."""
