"""The serving process: the ASGI app factory, the HTTP server under it, the demo, and
process-level policies."""
