"""``podium player export | erase | erasure`` on an embedded store (``cli/player.py``)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from podium import bootstrap
from podium.cli.main import app
from podium.config.settings import load
from podium.domain.models import Profile

runner = CliRunner()


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "podium.toml"
    cfg.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path}/p.db"\nerasure_secret = "s"\n'
        f'[archive]\ndir = "{tmp_path}/archive"\n[workers]\nerasure_settle_s = 0.0\n'
    )
    return cfg


async def _profile(cfg: Path) -> None:
    b = bootstrap.build(load(str(cfg), env={}))
    await b.start()
    try:
        await b.podium.player_admin.set_profile(Profile("p_0193", "Vex"))
    finally:
        await b.close()


def test_export_erase_and_the_receipt(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    asyncio.run(_profile(cfg))
    out = runner.invoke(app, ["player", "export", "p_0193", "--config", str(cfg)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["profile"][0]["name"] == "Vex"
    target = tmp_path / "p.json"
    out = runner.invoke(
        app, ["player", "export", "p_0193", "-o", str(target), "--config", str(cfg)]
    )
    assert out.exit_code == 0 and json.loads(target.read_bytes())["playerId"] == "p_0193"

    out = runner.invoke(app, ["player", "erase", "p_0193", "--config", str(cfg)])
    assert out.exit_code == 0, out.output
    receipt = re.search(r"erasure (era_[0-9a-f]{24}): pending", out.stdout)
    assert receipt is not None and "p_0193" not in out.stdout
    out = runner.invoke(app, ["player", "erase", "p_0193", "--wait", "--config", str(cfg)])
    assert out.exit_code == 0 and f"erasure {receipt.group(1)}: done" in out.stdout
    assert "profile" in out.stdout  # the counts, by kind
    out = runner.invoke(app, ["player", "erasure", receipt.group(1), "--config", str(cfg)])
    assert out.exit_code == 0 and ": done," in out.stdout
    out = runner.invoke(app, ["player", "erasure", "era_" + "0" * 24, "--config", str(cfg)])
    assert out.exit_code == 1
    after = runner.invoke(app, ["player", "export", "p_0193", "--config", str(cfg)])
    assert json.loads(after.stdout)["erased"] is True
