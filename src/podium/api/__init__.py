"""The HTTP API (docs/architecture.md §3.2): FastAPI app, routes, schemas, auth, problem+json."""
