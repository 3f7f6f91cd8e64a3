"""podium: real-time leaderboards for games.

The public surface is the ``podium`` command (``podium.cli``) and the HTTP API built by
``podium.api.app.create_app``. Everything else is internal and may change.
"""

__version__ = "0.1.0"
