// The player side of the board page: look a player up (rank, points, the players around
// them), their friends' board, and where they sit in the score distribution. On a board split
// by country a new search asks without a group, so the player is found in their own; the page
// then follows that group (the rank answer's window says it: 2026-W44@FR).

import { api, el, fmt, ordinal, path, playerCell } from "./dom.js";
import { barChart } from "./svg.js";

const NEIGHBORS = 5;
const BUCKETS = 20;
let shownEmpty = false; // the chart shows an empty board, to be drawn again once it fills

function percent(p) {
  return p < 1 ? `${+p.toPrecision(1)}%` : `${Math.round(p)}%`;
}

// How a rank reads. An estimate (a board split across shards answers "exact": false) must
// never pass for an exact rank, so it says "about" and carries estimate: true for styling.
export function describeRank(resp) {
  if (resp.exact === false) {
    const top = resp.topPercent === null || resp.topPercent === undefined ? "" : `, top ${percent(resp.topPercent)}`;
    return { text: `about ${ordinal(resp.rank)}${top}`, estimate: true };
  }
  return { text: ordinal(resp.rank), estimate: false };
}

const $ = (id) => document.getElementById(id);

// Render a rank answer (GET /v1/boards/{board}/players/{id}) into the result card.
export function showRank(resp, playerId = resp.playerId) {
  const { text, estimate } = describeRank(resp);
  const rank = el("strong", { class: estimate ? "rank-text estimate" : "rank-text", text });
  const badge = estimate
    ? el("span", {
        class: "badge estimate-badge",
        title: "Estimated from a histogram: this board is split across shards below its exact top",
        text: "estimate",
      })
    : null;
  $("rank").replaceChildren(
    el("p", { class: "who-line", text: playerId ? `${playerId} on ${resp.board} · ${resp.window}` : "" }),
    el("p", { class: "rank-line" }, rank, badge),
    el("p", { class: "points-line", text: `${fmt(resp.points)} points` }),
  );
  const around = resp.neighbors || [];
  $("around").hidden = around.length === 0;
  $("around-body").replaceChildren(
    ...around.map((e) =>
      el(
        "tr",
        { class: e.playerId === playerId ? "me" : null, "aria-current": e.playerId === playerId ? "true" : null },
        el("td", { class: "num", text: fmt(e.rank) }),
        playerCell(e),
        el("td", { class: "num", text: fmt(e.points) }),
      ),
    ),
  );
}

function showFriends(page, playerId) {
  const rows = page.entries.map((e) =>
    el(
      "tr",
      { class: e.playerId === playerId ? "me" : null },
      el("td", { class: "num", text: fmt(e.rank) }),
      playerCell(e),
      el("td", { class: "num", text: e.globalRank ? fmt(e.globalRank) : "–" }),
      el("td", { class: "num", text: fmt(e.points) }),
    ),
  );
  if (!rows.length) {
    rows.push(el("tr", {}, el("td", { colspan: 4, class: "empty", text: "No friends on this board yet." })));
  }
  $("friends-caption").textContent = `${playerId} and friends · ${page.board} · ${page.window}`;
  $("friends-body").replaceChildren(...rows);
  $("friends-section").hidden = false;
}

export async function showDistribution(ctx, marker = null) {
  const q = new URLSearchParams({ buckets: BUCKETS });
  if (ctx.window) q.set("window", ctx.window);
  if (ctx.group) q.set("group", ctx.group);
  if (ctx.grouped && !ctx.group) {
    barChart($("dist-chart"), [], null);
    $("dist-caption").textContent = "Pick a group to see its distribution.";
    return;
  }
  try {
    const d = await api(`/v1/boards/${path(ctx.board)}/distribution?${q}`);
    const who = marker ? `${marker.playerId}: ${fmt(marker.points)}` : "";
    barChart($("dist-chart"), d.buckets, marker ? marker.points : null, { label: who });
    shownEmpty = d.players === 0;
    const range = d.buckets.length ? `, ${fmt(d.buckets[0].low)}–${fmt(d.buckets[d.buckets.length - 1].high)} points` : "";
    const summary = `${fmt(d.players)} players on ${d.board} · ${d.window}${range}` +
      (marker ? `; ${marker.playerId}'s ${fmt(marker.points)} points are marked` : "");
    $("dist-caption").textContent = summary;
    $("dist-chart").setAttribute("aria-label", `Score distribution: ${summary}`);
  } catch (e) {
    $("dist-caption").textContent = `Distribution unavailable: ${e.message}`;
  }
}

// Look a player up on the board and window in ctx; fills the rank card, friends, and chart.
// `own`: a new search, in the player's own group on a board split by country.
export async function lookUp(ctx, playerId, own = false) {
  const q = new URLSearchParams({ neighbors: NEIGHBORS });
  const fq = new URLSearchParams();
  for (const params of [q, fq]) {
    if (ctx.window) params.set("window", ctx.window);
    if (ctx.group && !own) params.set("group", ctx.group);
  }
  const base = `/v1/boards/${path(ctx.board)}/players/${path(playerId)}`;
  const [rank, friends] = await Promise.allSettled([api(`${base}?${q}`), api(`${base}/friends?${fq}`)]);
  if (rank.status === "fulfilled") {
    showRank(rank.value, playerId);
    const group = ctx.grouped ? (rank.value.window.split("@")[1] || ctx.group) : null;
    await showDistribution({ ...ctx, group }, { playerId, points: rank.value.points });
    if (own) found(rank.value.window);
  } else {
    $("rank").replaceChildren(el("p", { class: "error", text: rank.reason.message }));
    $("around").hidden = true;
    await showDistribution(ctx);
  }
  if (friends.status === "fulfilled") showFriends(friends.value, playerId);
  else $("friends-section").hidden = true;
}

let found = () => {};

// Wire the search form; `context()` gives the board, window and group the page shows now;
// `onFound(window)` is told the window (and so the group) a new search found the player in.
export function initPlayer(context, onFound = () => {}) {
  const input = $("player");
  found = onFound;
  let current = null; // the player looked up, followed when the board, window or group changes
  const run = (id) => {
    input.value = id;
    current = id;
    lookUp(context(), id, true);
  };
  $("search").addEventListener("submit", (e) => {
    e.preventDefault();
    if (input.value.trim()) run(input.value.trim());
  });
  document.addEventListener("podium:player", (e) => run(e.detail));
  return {
    // The board or window changed: follow with the player looked up, if any.
    refresh() {
      if (current) lookUp(context(), current);
      else showDistribution(context());
    },
    // The live board got its first players: draw the chart once more (not on every frame,
    // which would have every open page poll the index).
    boardHasPlayers() {
      if (shownEmpty) {
        shownEmpty = false;
        showDistribution(context());
      }
    },
  };
}
