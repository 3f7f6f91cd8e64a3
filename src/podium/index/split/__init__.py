"""A board split by player across index shards, as one rank index."""
