"""``podium tournament create | list | end``, on the embedded and production
configurations: the admin's use cases from a terminal, their refusals in one line."""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.conftest import Backends
from tests.integration.test_cli_ops import podium, settings_file

HOUR = 3600


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


async def test_create_list_and_end_from_the_command_line(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    conf = settings_file(tmp_path, config_kind, backend_urls)
    now = int(time.time())
    create = [
        "tournament", "create", "cup", "--title", "The Cup", "--modes", "default",
        "--starts-at", rfc3339(now - HOUR), "--ends-at", rfc3339(now + HOUR),
        "--max-attempts", "3", "--category", "weekly",
    ]  # fmt: skip
    made = await podium(conf, *create)
    assert made.exit_code == 0 and made.output.startswith("created cup  live"), made.output
    again = await podium(conf, *create)
    assert again.exit_code == 0 and again.output.startswith("exists, the same"), again.output
    other = await podium(conf, *create[:-2], "--category", "daily")
    assert other.exit_code == 1 and "another definition" in other.output, other.output
    later = rfc3339(now + 2 * HOUR)  # after its end
    bad = await podium(conf, *create[:2], "b", *create[3:8], later, *create[9:11])
    assert bad.exit_code == 1 and "endsAt" in bad.output, bad.output

    listed = await podium(conf, "tournament", "list", "--state", "live")
    assert listed.exit_code == 0 and listed.output.startswith("cup  live"), listed.output
    ended = await podium(conf, "tournament", "end", "cup")
    assert ended.exit_code == 0 and ended.output.startswith("ended cup  ended"), ended.output
    listed = await podium(conf, "tournament", "list", "--state", "live")
    assert listed.exit_code == 0 and listed.output == "", listed.output
    hourly = await podium(
        conf, "tournament", "create", "hourly", "--title", "Hourly", "--modes", "default",
        "--schedule", "0 * * * *", "--duration-seconds", "1800",
    )  # fmt: skip
    assert hourly.exit_code == 0 and "every '0 * * * *' for 1800 s" in hourly.output, hourly
    overlap = await podium(
        conf, "tournament", "create", "h2", "--title", "H", "--modes", "default",
        "--schedule", "0 * * * *", "--duration-seconds", "7200",
    )  # fmt: skip
    assert overlap.exit_code == 1 and "durationSeconds" in overlap.output, overlap.output
    missing = await podium(conf, "tournament", "end", "nope")
    assert missing.exit_code == 1 and "no tournament" in missing.output, missing.output
