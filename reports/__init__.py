"""Read-only views across all apps: the home dashboards and the monthly review."""
