"""Background roles: relay and updater today; aggregator, freezer and reconciler later."""
