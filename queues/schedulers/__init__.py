"""What the rules become in each scheduler, computed without touching one (pure).

The plan every backend produces (``backends``: states, changes, drift), the desired Slurm
QOS, accounts and associations (``slurm``) and Kueue objects (``kueue``) the effective rules
compile to, with each scheduler's names and values, and the wait reasons it reports mapped
onto the wait categories (``classify``). The services that sync, enforce and collect build
on it; the selectors that answer where a job would run and why it waits read it. It imports
models and governance's selectors only: never a service.
"""
