"""podium: real-time leaderboards for games.

The public surface is the ``podium`` command (``podium.cli.main``) and the HTTP API built by
``podium.serve.app.create_app``. Everything else is internal and may change.
"""

__version__ = "0.1.0"
