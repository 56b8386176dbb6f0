"""Slurm: the names and values Arbiter writes, the desired state the rules compile to and
the slurm.conf lines they need."""
