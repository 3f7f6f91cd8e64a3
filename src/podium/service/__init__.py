"""The use cases, wired once (wiring.py): what the API, the web pages, the command line and
the workers call."""
