"""``/docs``: Swagger UI for the OpenAPI document, served from podium's own origin.

The scripts come from the ``fastapi-offline`` package (Swagger UI 5, which reads OpenAPI 3.1;
only its files are used), never from a CDN: this origin's pages
hold a credential (the ops page's key), and a script from elsewhere could read it. The page
has no inline script either, so that the pages' Content-Security-Policy (``script-src
'self'``) holds for it too.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

from podium.errors import NotFound

SWAGGER_UI = files("fastapi_offline") / "static"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon.png": "image/png",
}

PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>podium: API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/assets/favicon.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
"""

INIT = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
});
"""


def install(app: FastAPI) -> None:
    @app.get("/docs", include_in_schema=False)
    async def docs_page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/docs/init.js", include_in_schema=False)
    async def docs_init() -> Response:
        return Response(INIT, media_type="text/javascript")

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> FileResponse:
        if name not in ASSETS:
            raise NotFound(f"no asset {name!r}")
        return FileResponse(str(SWAGGER_UI / name), media_type=ASSETS[name])
