"""Rank index adapters: the copy that answers ranks. ``memory`` (embedded) and ``redis``."""
