"""``podium loadgen``: simulated game servers and players against a running podium, open
loop, with a live display and a summary (README, "Load generation").

The pure parts (the traffic mix and the arrival schedule in ``mix.py``, the latency
recorder in ``latency.py``, the tallies and the summary in ``stats.py``) are apart from the
loop that drives the API through ``podium.client`` (``driver.py``, ``verify.py``) and from
the display (``display.py``); ``command.py`` is the command's options.
"""
