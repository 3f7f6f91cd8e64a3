// Boards and windows: every board with its windows and their state, a window frozen now
// (confirmed by typing its id), frozen standings downloaded, and a board's distribution.

import { call, enc } from "./api.js";
import { fmt } from "../dom.js";
import { barChart } from "../svg.js";
import { act, card, confirmTyped, el, kv, notice, svgChart, table, when } from "./ui.js";

export async function show(root, ctx) {
  const { boards } = await call("GET", "/v1/boards");
  root.append(await upkeepCard());
  for (const b of boards) root.append(await boardCard(ctx, b));
}

const ENDED = ["done", "failed"];

// The rebuilds and reshards running now (podium rebuild, wherever it runs) and those ended in
// the last minute: what, phase, players written out of the store's count, since when. Read
// again every 2 s while one runs and the card is on the page.
async function upkeepCard() {
  const box = card("Rebuilds and reshards");
  box.id = "upkeep";
  const body = el("div", { "aria-live": "polite" });
  const load = async () => {
    const { running } = await call("GET", "/v1/admin/upkeep");
    body.replaceChildren(upkeepTable(running));
    return running;
  };
  const again = () =>
    setTimeout(async () => {
      if (!box.isConnected) return;
      try {
        if ((await load()).some((r) => !ENDED.includes(r.phase))) again();
      } catch {
        again();
      }
    }, 2000);
  box.append(
    el("p", { class: "help", text: "podium rebuild and its --shards tell every API process how far they are, about every second." }),
    body,
    el("button", { type: "button", text: "Read again", onclick: (ev) => act(ev.target, load) }),
  );
  if ((await load()).some((r) => !ENDED.includes(r.phase))) again();
  return box;
}

function upkeepTable(running) {
  if (!running.length) return el("p", { class: "empty", text: "No rebuild or reshard is running, nor ended in the last minute." });
  return table(
    "running now, and ended in the last minute; latest started first",
    ["What", "Phase", "Window", "Players done#", "Windows done#", "Started", "Last told"],
    running.map((r) => {
      const what = r.kind === "reshard" ? `reshard from ${r.shardsFrom} to ${r.shardsTo} shards` : `rebuild of ${r.windows.join(", ")}`;
      const phase = r.phase === "failed" && r.detail ? `failed: ${r.detail}` : r.phase;
      const of = r.total === undefined ? fmt(r.done) : `${fmt(r.done)} of ${fmt(r.total)}`;
      const bar = el("progress", { max: String(Math.max(1, r.total || 0)), value: String(r.done), "aria-label": `players done in ${r.window || "the window"}` });
      return [what, phase, r.window || "–", el("span", { class: "inline" }, bar, of), `${fmt(r.windowsDone)} of ${fmt(r.windows.length)}`, when(r.startedAt), when(r.updatedAt)];
    }),
  );
}

async function boardCard(ctx, b) {
  const box = card(`Board ${b.name}`);
  box.dataset.board = b.name;
  box.append(
    kv([
      ["Window", b.window],
      ["Current window", b.currentWindow],
      ["Ends", when(b.endsAt)],
      ["Rule", `${b.aggregate}, ${b.order}, ties ${b.ties}`],
      ["Modes", b.modes ? b.modes.join(", ") : "all"],
      ["Split by", b.groupBy],
    ]),
  );
  const { windows } = await call("GET", `/v1/boards/${enc(b.name)}/windows`, { query: { limit: 20 } });
  const freezing = el("div");
  box.append(
    table(
      "its windows, newest first",
      ["Window", "State", "Players#", "Start", "End", "Frozen", ""],
      windows.map((w) => [
        w.id,
        w.state,
        w.players === undefined ? "–" : fmt(w.players),
        when(w.start),
        when(w.end),
        w.frozenAt ? when(w.frozenAt) : "",
        windowAction(ctx, b, w, freezing),
      ]),
      "no window yet",
    ),
    freezing,
  );
  if (ctx.canWrite) {
    const league = await leagueOf(b);
    if (league) box.append(league);
  }
  if (!b.groupBy && b.currentWindow) {
    try {
      const d = await call("GET", `/v1/boards/${enc(b.name)}/distribution`);
      const svg = svgChart(`distribution of points on ${b.name}, ${d.window}`);
      barChart(svg, d.buckets, null, { width: 480, height: 150 });
      box.append(el("figure", { class: "chart-figure" }, svg, el("figcaption", { text: `${fmt(d.players)} players by points, ${d.window}` })));
    } catch (e) {
      box.append(el("p", { class: "help", text: `No distribution: ${e.words || e.message}` }));
    }
  }
  return box;
}

// A league board's rules and the cohorts of its current window (the first 200 by id), each
// opened on its members; null for a board not played in cohorts.
async function leagueOf(b) {
  let l;
  try {
    l = await call("GET", `/v1/admin/boards/${enc(b.name)}/cohorts`, { query: { limit: 200 } });
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
  const members = el("div");
  const open = (c) =>
    el("button", {
      type: "button",
      text: "Members",
      "aria-label": `Members of ${c.cohortId}`,
      onclick: async () => {
        const full = await call("GET", `/v1/boards/${enc(b.name)}/cohorts/${enc(c.cohortId)}`);
        members.replaceChildren(
          table(
            `cohort ${full.cohortId} (${full.tier})${full.frozen ? ", final" : ""}: up to rank ${full.promoteThrough ?? "–"} moves up, from ${full.demoteFrom ?? "–"} down`,
            ["Rank#", "Player", "Points#"],
            full.members.map((m) => [fmt(m.rank), m.name ? `${m.name} (${m.playerId})` : m.playerId, fmt(m.points)]),
            "nobody placed yet",
          ),
        );
      },
    });
  return el(
    "div",
    { class: "league" },
    el("p", { text: `League: tiers ${l.tiers.join(" → ")}, cohorts of ${l.cohortSize}, top ${l.promote} up, bottom ${l.demote} down.` }),
    table(
      `cohorts of ${l.window}${l.next ? " (the first 200)" : ""}`,
      ["Cohort", "Tier", "Members#", ""],
      l.cohorts.map((c) => [c.cohortId, c.tier, fmt(c.members), open(c)]),
      "no cohort yet: a player's first result places them",
    ),
    members,
  );
}

function windowAction(ctx, b, w, freezing) {
  if (w.state === "frozen" && w.standings) {
    // A plain link: standings are public reads, downloaded without the key.
    return el("a", { href: w.standings, download: "", text: "Download standings" });
  }
  if (!ctx.canWrite || w.group) return "";
  return el("button", {
    type: "button",
    class: "danger",
    text: "Freeze…",
    "aria-label": `Freeze ${b.name} ${w.id}`,
    onclick: () => {
      freezing.replaceChildren(
        confirmTyped({
          what: `Freezing ${b.name} ${w.id} now makes its standings final: no late result counts for it after this, and its standings file is written.${w.state === "open" ? " This window is still open." : ""}`,
          expected: w.id,
          button: "Freeze",
          onConfirm: async () => {
            const f = await call("POST", `/v1/admin/boards/${enc(b.name)}/windows/${enc(w.id)}/freeze`);
            notice(`${f.board} ${f.window} is frozen with ${fmt(f.players)} players${f.frozenNow ? "" : " (it was frozen already)"}`);
            await ctx.go("boards");
          },
        }),
      );
    },
  });
}
