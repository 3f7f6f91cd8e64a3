"""The command line, one module per command group (main.py holds the root)."""
