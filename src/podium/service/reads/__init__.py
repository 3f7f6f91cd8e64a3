"""The read use cases: pages, ranks, lookups, groups, past windows, and page cursors."""
