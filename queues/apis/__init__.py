"""The queues API, one module per concern: ``clusters`` (clusters, their settings and
connection check), ``sync`` (sync now, dry run, sync runs), ``placement``, ``replay`` and
``workload`` (job events, a job's wait). ``queues/urls.py`` imports each by name."""
