"""Change log adapters: between the store's outbox and the board updaters."""
