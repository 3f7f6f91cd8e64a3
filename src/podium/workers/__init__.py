"""Background roles, one module each (relay, updater, aggregator, freezer, reconciler), the
registry that lists them (``roles``) and the loop they share (``runner``)."""
