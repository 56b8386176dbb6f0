"""Priority-upgrade and urgent-exception requests and their approvals (to come)."""
