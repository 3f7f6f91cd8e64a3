// The player side of the board page: look a player up (rank, points, the players around
// them), their friends' board, and where they sit in the score distribution.

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
export async function lookUp(ctx, playerId) {
  const q = new URLSearchParams({ neighbors: NEIGHBORS });
  if (ctx.window) q.set("window", ctx.window);
  const base = `/v1/boards/${path(ctx.board)}/players/${path(playerId)}`;
  const fq = ctx.window ? `?window=${encodeURIComponent(ctx.window)}` : "";
  const [rank, friends] = await Promise.allSettled([api(`${base}?${q}`), api(`${base}/friends${fq}`)]);
  if (rank.status === "fulfilled") {
    showRank(rank.value, playerId);
    await showDistribution(ctx, { playerId, points: rank.value.points });
  } else {
    $("rank").replaceChildren(el("p", { class: "error", text: rank.reason.message }));
    $("around").hidden = true;
    await showDistribution(ctx);
  }
  if (friends.status === "fulfilled") showFriends(friends.value, playerId);
  else $("friends-section").hidden = true;
}

// Wire the search form; `context()` gives the board and window the page shows now.
export function initPlayer(context) {
  const input = $("player");
  const run = (id) => {
    input.value = id;
    lookUp(context(), id);
  };
  $("search").addEventListener("submit", (e) => {
    e.preventDefault();
    if (input.value.trim()) run(input.value.trim());
  });
  document.addEventListener("podium:player", (e) => run(e.detail));
  return {
    // The board or window changed: follow with the player looked up, if any.
    refresh() {
      const id = input.value.trim();
      if (id && $("rank").childElementCount) lookUp(context(), id);
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
