// Players: found by id or name, one player's file (ranks on every board, tiers and cohorts,
// tournaments, past windows, latest results with flags and metadata), ban and unban; and
// the review queue of flagged results; a player's data exported (a JSON file) and erased.

import { call, enc, Problem } from "./api.js";
import { fmt } from "../dom.js";
import { lineChart } from "../svg.js";
import { act, card, confirmTyped, el, fail, field, kv, legend, notice, readonly, svgChart, table, when } from "./ui.js";

const ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

// An answer, or the problem's words in its place (a board the player is not on is a 404).
async function orWords(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    if (e instanceof Problem && e.status !== 0) return { words: e.status === 404 ? "not there" : e.words };
    throw e;
  }
}

function openButton(ctx, playerId, label) {
  return el("button", { type: "button", class: "player-link", text: label, onclick: () => ctx.go("players", playerId) });
}

export async function show(root, ctx, playerId) {
  const q = el("input", { id: "find", name: "q", type: "search", required: true, autocomplete: "off", spellcheck: "false", value: playerId || "" });
  const found = el("div");
  const form = el(
    "form",
    { class: "inline", role: "search" },
    el("label", { for: "find", text: ctx.canWrite ? "Player id or name" : "Player id" }),
    q,
    el("button", { type: "submit", text: "Find" }),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = q.value.trim();
    if (!text) return;
    if (!ctx.canWrite) {
      // An ops key reads no admin route: a player is opened by id, on the public reads.
      if (ID.test(text)) ctx.go("players", text);
      else fail(new Problem(0, "Not an id", "give a player id (1 to 64 of letters, digits, _.:-)"));
      return;
    }
    act(form.querySelector("button"), () => search(ctx, text, found));
  });
  root.append(card("Find a player", form, ctx.canWrite ? null : readonly("searching by name"), found));
  if (playerId) await file(root, ctx, playerId);
}

async function search(ctx, text, found) {
  const { players } = await call("GET", "/v1/admin/players", { query: { q: text, limit: 50 } });
  found.replaceChildren(
    table(
      `${players.length} found for “${text}”`,
      ["Player", "Id", "Country"],
      players.map((p) => [openButton(ctx, p.playerId, p.name || p.playerId), p.playerId, p.country]),
      "no player has that id or name",
    ),
  );
}

async function file(root, ctx, playerId) {
  const admin = ctx.canWrite ? await call("GET", `/v1/admin/players/${enc(playerId)}`, { query: { results: 50 } }) : null;
  const head = el("h2", { id: "player-title", text: admin && admin.name ? `${admin.name} · ${playerId}` : playerId });
  const who = card("Profile");
  who.replaceChildren(head);
  if (admin) {
    who.append(
      kv([
        ["Id", admin.playerId],
        ["Name", admin.name],
        ["Country", admin.country],
        ["Avatar", admin.avatar],
        ["Banned", admin.banned ? `yes, since ${when(admin.ban.bannedAt)}` : "no"],
        ["Reason", admin.banned ? admin.ban.reason : null],
      ]),
    );
  } else {
    who.append(readonly("the profile, ban and results"));
  }
  root.append(who);

  const { boards } = await call("GET", "/v1/boards");
  const ranks = await Promise.all(boards.map((b) => orWords(call("GET", `/v1/boards/${enc(b.name)}/players/${enc(playerId)}`))));
  const rankRows = boards.map((b, i) => {
    const r = ranks[i];
    if (!r.ok) return [b.name, b.currentWindow, r.words, ""];
    const rank = r.ok.exact === false ? `about ${fmt(r.ok.rank)} (${fmt(r.ok.rankLow)}–${fmt(r.ok.rankHigh)})` : fmt(r.ok.rank);
    return [b.name, b.currentWindow, rank, fmt(r.ok.points)];
  });
  const onBoards = rankRows.filter((_, i) => ranks[i].ok).map((r) => `${r[0]} (rank ${r[2]})`);
  root.append(card("Boards now", table("rank and points in each board's current window", ["Board", "Window", "Rank#", "Points#"], rankRows)));

  const [tiers, tourneys] = await Promise.all([
    orWords(call("GET", `/v1/players/${enc(playerId)}/tiers`)),
    call("GET", "/v1/tournaments", { query: { limit: 50 } }),
  ]);
  // A board is a league when it answers the player's cohort; the tier that a frozen cohort
  // decided comes from their tiers.
  const decided = new Map((tiers.ok ? tiers.ok.boards : []).map((t) => [t.board, t]));
  const cohorts = await Promise.all(boards.map((b) => orWords(call("GET", `/v1/boards/${enc(b.name)}/players/${enc(playerId)}/cohort`))));
  const leagueRows = boards
    .map((b, i) => [b, cohorts[i].ok, decided.get(b.name)])
    .filter(([, c, t]) => c || t)
    .map(([b, c, t]) => {
      const mine = c ? c.members.find((m) => m.playerId === playerId) : null;
      return [b.name, t ? t.tier : c.tier, t ? t.moved : null, c ? c.cohortId : "–", mine ? fmt(mine.rank) : ""];
    });
  const standing = await Promise.all(
    tourneys.tournaments.map((t) => orWords(call("GET", `/v1/tournaments/${enc(t.id)}/players/${enc(playerId)}`))),
  );
  const inTourneys = tourneys.tournaments
    .map((t, i) => [t, standing[i]])
    .filter(([, s]) => s.ok)
    .map(([t, s]) => [t.title, t.id, t.state, fmt(s.ok.rank), fmt(s.ok.points)]);
  root.append(
    el(
      "div",
      { class: "grid2" },
      card(
        "Leagues",
        table(
          "tier and cohort on each league board",
          ["Board", "Tier", "Last move", "Cohort", "Rank in cohort#"],
          leagueRows,
          "in no league",
        ),
      ),
      card("Tournaments", table("the tournaments they have a standing in", ["Title", "Id", "State", "Rank#", "Points#"], inTourneys, "in no tournament")),
    ),
  );

  await past(root, boards, playerId);

  if (admin) {
    const flagged = admin.results.filter((r) => r.flag && !r.acceptedAt && !r.rejectedAt);
    const flagText = (r) => (r.acceptedAt ? `${r.flag} (accepted ${when(r.acceptedAt)})` : r.rejectedAt ? `${r.flag} (rejected ${when(r.rejectedAt)}: not counted)` : r.flag);
    root.append(
      card(
        "Latest results",
        el("p", { class: "help", text: `${admin.results.length} latest, ${flagged.length} flagged for review` }),
        table(
          "newest recorded first; metadata as the game server sent it",
          ["Match", "Mode", "Points#", "Ended", "Flag", "Metadata"],
          admin.results.map((r) => [
            r.matchId,
            r.mode,
            fmt(r.points),
            when(r.endedAt),
            r.flag ? el("strong", { class: r.acceptedAt || r.rejectedAt ? null : "state-failed", text: flagText(r) }) : "",
            r.metadata ? el("code", { class: "meta", text: JSON.stringify(r.metadata) }) : "",
          ]),
          "no results",
        ),
      ),
    );
    root.append(banCard(ctx, admin, onBoards));
    root.append(exportCard(admin.playerId), eraseCard(ctx, root, admin.playerId));
  }
}

// The player's final rank and points in each board's past windows, and a line of points.
async function past(root, boards, playerId) {
  const histories = await Promise.all(
    boards.map((b) => orWords(call("GET", `/v1/players/${enc(playerId)}/history`, { query: { board: b.name, limit: 20 } }))),
  );
  const rows = [];
  const series = [];
  boards.forEach((b, i) => {
    const h = histories[i].ok;
    if (!h || !h.windows.length) return;
    for (const w of h.windows) rows.push([b.name, w.window, fmt(w.rank), fmt(w.points)]);
    const oldestFirst = [...h.windows].reverse();
    series.push({ name: b.name, points: oldestFirst.map((w, j) => [j, w.points]), first: oldestFirst[0].window, last: oldestFirst.at(-1).window });
  });
  const body = [table("final rank and points in frozen windows, newest first", ["Board", "Window", "Rank#", "Points#"], rows, "no past window yet")];
  if (series.length) {
    const longest = series.reduce((a, s) => (s.points.length > a.points.length ? s : a));
    const span = Math.max(1, longest.points.length - 1);
    // Each line's windows counted back from its newest, so the newest sit at the right.
    const aligned = series.map((s) => ({ name: s.name, points: s.points.map(([j, v]) => [span - (s.points.length - 1 - j), v]) }));
    const svg = svgChart(`points in past windows: ${series.map((s) => s.name).join(", ")}`);
    lineChart(svg, aligned, { span, width: 480, height: 150, left: longest.first, right: longest.last });
    body.unshift(el("figure", { class: "chart-figure" }, svg, legend(series.map((s) => s.name)), el("figcaption", { text: "points per past window, oldest left" })));
  }
  root.append(card("Past windows", ...body));
}

function banCard(ctx, admin, onBoards) {
  const id = admin.playerId;
  const box = card(admin.banned ? "Unban" : "Ban");
  if (admin.banned) {
    box.append(
      confirmTyped({
        what: `Unbanning ${id} puts their totals back on every window not frozen yet; the ban's reason (“${admin.ban.reason}”) is dropped.`,
        expected: id,
        button: "Unban",
        onConfirm: async () => {
          await call("DELETE", `/v1/admin/players/${enc(id)}/ban`);
          notice(`${id} is unbanned`);
          await ctx.go("players", id);
        },
      }),
    );
    return box;
  }
  const reason = el("input", { type: "text", maxlength: 500, required: true, autocomplete: "off" });
  const changes = onBoards.length ? `They leave these boards at once: ${onBoards.join(", ")}.` : "They are on no board now.";
  box.append(
    confirmTyped({
      what: `Banning ${id} removes them from every board and refuses their results from now on; their totals stay in the store for an appeal. ${changes}`,
      expected: id,
      button: "Ban",
      extra: [field("Reason (kept with the ban)", reason)],
      onConfirm: async () => {
        const answer = await call("POST", `/v1/admin/players/${enc(id)}/ban`, { body: { reason: reason.value } });
        notice(answer && answer.detail ? answer.detail : `${id} is banned`);
        await ctx.go("players", id);
      },
    }),
  );
  return box;
}

// Everything podium holds on the player, as the API's one JSON document, saved as a file
// named after them: fetched with the key in its header (never in a URL), then handed to the
// browser as a Blob.
function exportCard(id) {
  const go = el("button", { type: "button", id: "export-data", text: "Export data" });
  go.addEventListener("click", () =>
    act(go, async () => {
      const blob = await call("GET", `/v1/admin/players/${enc(id)}/export`, { blob: true });
      const name = `${id.replace(/[^A-Za-z0-9_.-]/g, "_")}.json`;
      const url = URL.createObjectURL(blob);
      const link = el("a", { href: url, download: name, hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      notice(`${id}'s data is saved as ${name} (${fmt(blob.size)} bytes)`);
    }),
  );
  return card(
    "Export data",
    el("p", {
      class: "help",
      text: "One JSON document with everything podium holds on this player: profile, every result with its metadata, archived results, tallies, final standings, tiers and cohorts, tournament entries, friends, ban and flags, and the events and webhook deliveries that name them.",
    }),
    go,
  );
}

// The erasure: what it does said first, confirmed by typing the player's id; then the
// receipt, polled every second and a half until it is done. Asked again (the page opened
// anew while it runs), the API answers the same receipt, and the polling takes it up.
function eraseCard(ctx, root, id) {
  const box = card("Erase player");
  box.append(
    confirmTyped({
      what: `Erasing ${id} removes every copy podium holds of them, for good: their results, profile, friends, ban, tiers, tournament entries and the rank index's entries, and the archive files rewritten without them. Where another player's record depends on them (a frozen window's final standings, a finished tournament, a cohort), they stay as a pseudonym (erased-…), so everyone else keeps their rank and points. A later result for ${id} is refused. What left podium before (webhooks delivered, backups) is not reached. This cannot be undone; export their data first if it is asked for.`,
      expected: id,
      button: "Erase player",
      onConfirm: async () => {
        let receipt = await call("DELETE", `/v1/admin/players/${enc(id)}`);
        const status = el("div", { id: "erasure", role: "status", "aria-live": "polite" });
        box.replaceChildren(el("h2", { text: "Erase player" }), status);
        // The file shown above is theirs no more: only the search and the erasure stay.
        for (const other of [...root.children].slice(1)) if (other !== box) other.remove();
        const shown = () =>
          status.replaceChildren(
            el("p", { id: "erasure-state", "data-state": receipt.state, text: receipt.state === "done" ? `Done: ${id} is gone from podium.` : `Erasing ${id}: ${receipt.state}, at step ${receipt.step}…` }),
            kv([
              ["Receipt", receipt.id],
              ["State", receipt.state],
              ["Step", receipt.step],
              ["Asked", `${when(receipt.requestedAt)} by key ${receipt.requestedBy}`],
              ["Done", receipt.doneAt ? when(receipt.doneAt) : null],
            ]),
            table(
              "what was touched, by kind, so far (kinds with none left out)",
              ["Kind", "Count#"],
              Object.entries(receipt.counts || {})
                .filter(([, v]) => v)
                .map(([k, v]) => [k, fmt(v)]),
              "nothing counted yet",
            ),
          );
        shown();
        notice(`${id}'s erasure is asked: receipt ${receipt.id}`);
        while (receipt.state !== "done") {
          await new Promise((resolve) => setTimeout(resolve, 1500));
          if (!status.isConnected) return; // the operator went elsewhere: the erasure goes on
          receipt = await call("GET", `/v1/admin/erasures/${enc(receipt.id)}`);
          shown();
        }
        notice(`${id} is erased (receipt ${receipt.id}): the player is gone; their page now finds nothing`);
        status.append(
          el("button", { type: "button", text: "Open their page again", onclick: () => ctx.go("players", id) }),
        );
      },
    }),
  );
  return box;
}

// The review queue: the latest flagged results, and the top of a board with each player's
// count of flagged results, before prizes.
export async function review(root, ctx, boardName) {
  if (!ctx.canWrite) {
    root.append(card("Review", readonly("the review queue (flagged results)")));
    return;
  }
  const { boards } = await call("GET", "/v1/boards");
  const plain = boards.filter((b) => !b.groupBy);
  const chosen = boardName || (plain[0] && plain[0].name);
  const select = el("select", { id: "review-board" }, ...plain.map((b) => el("option", { value: b.name, selected: b.name === chosen, text: b.name })));
  select.addEventListener("change", () => ctx.go("review", select.value));
  root.append(card("Review before prizes", el("div", { class: "inline" }, el("label", { for: "review-board", text: "Board" }), select)));
  if (!chosen) return;
  const r = await call("GET", "/v1/admin/review", { query: { board: chosen, top: 50 } });
  r.order = (plain.find((b) => b.name === chosen) || {}).order; // for the rank a reject drops to
  const deciding = el("div");
  const accept = (f) =>
    el("button", {
      type: "button",
      text: "Accept…",
      "aria-label": `Accept ${f.matchId} of ${f.playerId}`,
      onclick: () => deciding.replaceChildren(acceptPanel(ctx, r, f)),
    });
  const reject = (f) =>
    el("button", {
      type: "button",
      class: "danger",
      text: "Reject…",
      "aria-label": `Reject ${f.matchId} of ${f.playerId}`,
      onclick: (ev) => act(ev.target, async () => deciding.replaceChildren(await rejectPanel(ctx, r, f))),
    });
  root.append(
    card(
      "Flagged results",
      el("p", {
        class: "help",
        text: "A flagged result counts until a moderator acts. Accept it when it is fair: it keeps counting and leaves this queue. Reject it when it is not: its points come back out of every window not frozen yet, and it stays in the player's file, marked. When the results are not the player's at all, open the player and ban them (typing their id).",
      }),
      table(
        `latest flagged results (${r.flagged.length})`,
        ["Player", "Match", "Mode", "Points#", "Ended", "Why", ""],
        r.flagged.map((f) => [openButton(ctx, f.playerId, f.playerId), f.matchId, f.mode, fmt(f.points), when(f.endedAt), f.reason, el("div", { class: "inline" }, accept(f), reject(f))]),
        "nothing flagged",
      ),
      deciding,
    ),
    card(
      `Top of ${r.board} · ${r.window}`,
      table(
        "each player's flagged results among those listed",
        ["Rank#", "Player", "Points#", "Flagged#"],
        r.top.map((e) => [fmt(e.rank), openButton(ctx, e.playerId, e.name || e.playerId), fmt(e.points), e.flagged ? el("strong", { class: "state-failed", text: String(e.flagged) }) : "0"]),
        "nobody on the board yet",
      ),
    ),
  );
}

// What accepting a flagged result changes, said before it is done: the player's standing on
// the board stays as it is (the result counted all along), the flag leaves the queue.
function acceptPanel(ctx, review, f) {
  const row = review.top.find((e) => e.playerId === f.playerId);
  const standing = row ? `${f.playerId} stays at rank ${fmt(row.rank)} with ${fmt(row.points)} points on ${review.board}` : `${f.playerId}'s totals stay as they are`;
  const go = el("button", { type: "button", text: "Accept" });
  go.addEventListener("click", () =>
    act(go, async () => {
      const a = await call("POST", `/v1/admin/players/${enc(f.playerId)}/results/${enc(f.matchId)}/accept`);
      await ctx.go("review", review.board);
      notice(`${f.matchId} of ${f.playerId} is accepted (${when(a.acceptedAt)})`);
    }),
  );
  return el(
    "div",
    { class: "confirm stack", id: "accept-panel" },
    el("p", { text: `Accepting ${f.matchId} (${fmt(f.points)} points, flagged: ${f.reason}) changes no total: ${standing}. It leaves the review queue; the reason stays in the player's file.` }),
    el("div", { class: "inline" }, go, el("button", { type: "button", text: "Cancel", onclick: (ev) => ev.target.closest("#accept-panel").remove() })),
  );
}
// What rejecting a flagged result changes, said before it is done, as the API recounts it
// (GET .../reject: nothing changed by asking): each open window it counts in, the player's
// points now and after, and on the board under review the rank they would drop to, counted
// from the top listed there. Confirmed by typing the player's id.
async function rejectPanel(ctx, review, f) {
  const base = `/v1/admin/players/${enc(f.playerId)}/results/${enc(f.matchId)}/reject`;
  const plan = await call("GET", base);
  const rankAfter = (c) => {
    if (c.board !== review.board || c.window !== review.window || c.after === null) return "–";
    const others = review.top.filter((e) => e.playerId !== f.playerId);
    const asc = review.order === "asc";
    const ahead = others.filter((e) => (asc ? e.points < c.after : e.points > c.after)).length;
    return ahead < others.length || others.length < 50 ? `about ${fmt(ahead + 1)}` : `below ${fmt(others.length)}`;
  };
  const rows = plan.recounts.map((c) => [
    c.board,
    c.window,
    fmt(c.before),
    c.after === null ? "leaves the window" : fmt(c.after),
    c.after === null ? `-${fmt(c.before)}` : fmt(c.after - c.before),
    rankAfter(c),
  ]);
  const panel = el("div", { class: "stack", id: "reject-panel" });
  panel.append(
    table(
      `what rejecting ${f.matchId} changes`,
      ["Board", "Window", "Points now#", "Points after#", "Change#", "Rank after#"],
      rows,
      `no open window counts it: ${f.playerId}'s totals stay as they are`,
    ),
    confirmTyped({
      what: `Rejecting ${f.matchId} of ${f.playerId} (${fmt(f.points)} points, flagged: ${f.reason}) takes it back out of every window not frozen yet, as listed; the boards follow within moments. The result stays in the player's file, marked rejected; frozen windows keep their final standings.`,
      expected: f.playerId,
      button: "Reject",
      onConfirm: async () => {
        const a = await call("POST", base);
        await ctx.go("review", review.board);
        notice(`${f.matchId} of ${f.playerId} is rejected (${when(a.rejectedAt)}): ${fmt(a.points)} points taken out`);
      },
    }),
    el("div", { class: "inline" }, el("button", { type: "button", text: "Cancel", onclick: () => panel.remove() })),
  );
  return panel;
}
