"""File adapters: frozen standings and pruned results as compressed files with manifests."""
