"""Background roles: relay, updater, aggregator, freezer (``lifecycle``) and reconciler."""
