"""Pure domain rules: no I/O, no imports from the rest of podium."""
