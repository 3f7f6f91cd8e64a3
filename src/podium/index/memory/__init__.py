"""The in-process rank index, its profiles, snapshots and rebuilds: the embedded mode."""
