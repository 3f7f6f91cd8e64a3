"""The HTTP API (DESIGN §3.2): FastAPI app, routes, schemas, auth, problem+json."""
