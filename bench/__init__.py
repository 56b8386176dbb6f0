"""On-demand benchmarks (run as scripts from the repository root; see each module)."""
