"""The scheduler side: compiling effective rules into Slurm and Kueue objects (to come)."""
