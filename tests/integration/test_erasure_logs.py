"""The logs of a fleet that erased a player: ``podium serve`` and ``podium worker`` as
processes of their own (the split store, 16 index shards, NATS JetStream as the log), their
output in files; the player's results, a ban and its lifting, a frozen window, then the
erasure, its eraser killed with -9 once and started again. Podium logs no player's id at
any level (the README's erasure section), so no byte of the id is in any file of the run,
from its first line to its last."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from podium.domain.windows import WindowKind, WindowRule
from podium.workers import roles
from tests.conftest import REDIS_URL
from tests.integration.conftest import split_databases  # noqa: F401
from tests.integration.fleet import Fleet
from tests.integration.test_erasure import GONE
from tests.nats_cluster import delete_stream, need_nats, stream_name
from tests.ports import free_port

UNTIL_S = 60.0  # for what the fleet does in the background: generous, never slept through


def _config(tmp: Path, dbs: list[str], prefix: str, nats_url: str, stream: str) -> Path:
    home, *shards = dbs
    path = tmp / "podium.toml"
    path.write_text(
        f'[store]\nurl = "{home}"\nshards = {json.dumps(shards)}\n'
        'pool_size = 4\nread_pool_size = 3\nerasure_secret = "s3cret"\n'
        f'[index]\nurl = "{REDIS_URL}"\nprefix = "{prefix}"\nshards = 16\n'
        f'[log]\nurl = "{nats_url}"\nstream = "{stream}"\npartitions = 4\n'
        f'[archive]\ndir = "{tmp}/archive"\n'
        "[server]\nread_rate_per_s = 0\npage_cache_s = 0\n"
        # long enough that the eraser is killed before the erasure's end, most runs
        "[workers]\nlease_s = 2.0\nerasure_settle_s = 2.0\n"
        # the killed eraser's lease on the record: what the restarted one waits out first
        "erasure_lease_s = 2.0\n"
        '[[boards]]\nname = "day"\nwindow = "day"\n'
        '[[boards]]\nname = "week"\nwindow = "week"\n'
    )
    return path


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_no_log_of_the_fleet_names_the_player(
    tmp_path: Path,
    split_databases: list[str],  # noqa: F811
    redis_prefix: str,
) -> None:
    url, name = need_nats(), stream_name()
    fleet = Fleet(_config(tmp_path, split_databases, redis_prefix, url, name), tmp_path)
    try:
        fleet.podium("migrate")
        key = fleet.podium("keys", "create", "--name", "gs", "--modes", "default")
        admin = fleet.podium("keys", "create", "--name", "ops", "--admin")
        receipt = asyncio.run(
            _scenario(fleet, key.strip().splitlines()[-1], admin.strip().splitlines()[-1])
        )
    except BaseException:
        fleet.stop_all()
        fleet.dump()
        raise
    finally:
        asyncio.run(delete_stream([url], name))
    fleet.stop_all()  # every process's output flushed and closed
    logs = sorted(tmp_path.glob("*.log"))
    assert {p.name.split("-")[0] for p in logs} == {"api", "worker", "eraser"}
    text = b"".join(p.read_bytes() for p in logs)
    assert b"worker running roles" in text and receipt.encode() in text  # they did log
    assert [p.name for p in logs if GONE.encode() in p.read_bytes()] == []


async def _scenario(fleet: Fleet, key: str, admin: str) -> str:
    """The player's data made and erased through the API; the erasure's receipt."""
    port = free_port()
    fleet.start("api", "serve", "--no-workers", port=port)
    others = [r for r in roles.NAMES if r != "eraser"]
    fleet.start("worker", "worker", "--roles", ",".join(others))
    fleet.start("eraser", "worker", "--roles", "eraser")
    await fleet.api_ready("api")
    await fleet.worker_ready("worker")
    await fleet.worker_ready("eraser")
    game = {"Authorization": f"Bearer {key}"}
    ops = {"Authorization": f"Bearer {admin}"}
    now = time.time()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:

        async def submit(match: str, results: list[tuple[str, int]]) -> httpx.Response:
            body = {
                "mode": "default",
                "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                "durationSeconds": 60,
                "results": [{"playerId": p, "points": pts} for p, pts in results],
            }
            return await c.post(f"/v1/matches/{match}/results", json=body, headers=game)

        async def week() -> list[str]:
            page = await c.get("/v1/boards/week")
            assert page.status_code == 200, page.text
            return [e["playerId"] for e in page.json()["entries"]]

        async def until(check: Any) -> Any:
            deadline = time.monotonic() + UNTIL_S
            while not (got := await check()) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            return got

        assert (await submit("m1", [(GONE, 30), ("a", 20)])).status_code == 200
        assert (await submit("m2", [(GONE, 31), ("b", 2)])).status_code == 200

        async def shown() -> bool:
            return await week() == [GONE, "a", "b"]

        assert await until(shown), await week()
        r = await c.post(f"/v1/admin/players/{GONE}/ban", json={"reason": "x"}, headers=ops)
        assert r.status_code in (202, 204), r.text
        r = await c.delete(f"/v1/admin/players/{GONE}/ban", headers=ops)
        assert r.status_code in (200, 204), r.text
        assert await until(shown), await week()
        day = WindowRule(WindowKind.DAY).window_at(int(now))
        assert day is not None
        r = await c.post(f"/v1/admin/boards/day/windows/{day.id}/freeze", headers=ops)
        assert r.status_code == 200, r.text

        r = await c.delete(f"/v1/admin/players/{GONE}", headers=ops)
        assert r.status_code == 202, r.text
        receipt: str = r.json()["id"]
        late = await submit("m3", [(GONE, 5), ("a", 5)])
        assert late.status_code == 403, late.text
        await asyncio.sleep(1.0)
        fleet.kill9("eraser")  # mid-way, most runs (erasure_settle_s): it resumes
        fleet.restart("eraser")

        async def done() -> bool:
            got = await c.get(f"/v1/admin/erasures/{receipt}", headers=ops)
            return bool(got.json()["state"] == "done")

        assert await until(done), "the erasure did not finish"

        async def moved_up() -> bool:
            return await week() == ["a", "b"]

        assert await until(moved_up), await week()
        return receipt
