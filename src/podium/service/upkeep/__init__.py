"""Refilling the index from the store: the rebuild, the gap-free rebuild, and a reshard of a
split index."""
