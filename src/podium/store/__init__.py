"""Score store adapters: the record. ``sqlite`` (embedded) and ``postgres`` (production)."""
