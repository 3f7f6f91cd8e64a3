// The board page: a tab per board, the live top 100 over Server-Sent Events (rows slide to
// their new places), past windows on demand, and the player panel (player.js).

import { api, clock, el, fmt, path, playerCell } from "./dom.js";
import { describeRank, initPlayer, showRank } from "./player.js";
import { windowsBefore } from "./windows.js";

const PAST_WINDOWS = 6;
const MOTION = !window.matchMedia("(prefers-reduced-motion: reduce)").matches;
const $ = (id) => document.getElementById(id);

const state = { boards: [], board: null, window: null, source: null, rows: new Map() };
const context = () => ({ board: state.board.name, window: state.window });
let player;

// Exposed for the browser tests and for poking at from the console.
window.podium = { describeRank, showRank, state };

// The state is a live region, so it changes only when the state does; the time of the
// last frame sits beside it, outside the region, or a screen reader would read it every second.
function setStatus(kind, text, time = "") {
  $("status").dataset.state = kind;
  if ($("status-text").textContent !== text) $("status-text").textContent = text;
  $("status-time").textContent = time;
}

// -- tabs: buttons with aria-selected; arrow keys, Home and End move between them ----------

function renderTabs() {
  const tabs = state.boards.map((b) =>
    el("button", {
      type: "button",
      role: "tab",
      id: `tab-${b.name}`,
      "aria-controls": "panel",
      "aria-selected": "false",
      tabindex: "-1",
      text: b.name,
      onclick: () => selectBoard(b.name),
    }),
  );
  $("tabs").replaceChildren(...tabs);
}

$("tabs").addEventListener("keydown", (e) => {
  const tabs = [...$("tabs").querySelectorAll('[role="tab"]')];
  const i = tabs.indexOf(document.activeElement);
  const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
  if (i < 0 || next === undefined) return;
  e.preventDefault();
  const tab = tabs[(next + tabs.length) % tabs.length];
  tab.focus();
  tab.click();
});

function selectBoard(name) {
  state.board = state.boards.find((b) => b.name === name) || state.boards[0];
  for (const tab of $("tabs").children) {
    const on = tab.id === `tab-${state.board.name}`;
    tab.setAttribute("aria-selected", String(on));
    tab.tabIndex = on ? 0 : -1;
  }
  $("panel").setAttribute("aria-labelledby", `tab-${state.board.name}`);
  history.replaceState(null, "", `#${encodeURIComponent(state.board.name)}`);
  const ids = windowsBefore(state.board.window, state.board.currentWindow, PAST_WINDOWS);
  $("window").replaceChildren(
    ...ids.map((id, k) => el("option", { value: k ? id : "", text: k ? id : `${id} (live)` })),
  );
  $("window-id").placeholder = state.board.currentWindow || "";
  showWindow(null);
}

// -- the window shown: the current one live, or a past one read once -----------------------

async function showWindow(windowId) {
  state.window = windowId || null;
  state.source?.close();
  state.source = null;
  state.rows.clear();
  $("top-body").replaceChildren();
  const board = state.board.name;
  if (!state.window) {
    $("window").value = "";
    setStatus("connecting", "connecting…");
    const source = new EventSource(`/v1/boards/${path(board)}/stream`);
    source.onmessage = (e) => renderPage(JSON.parse(e.data), true);
    source.onopen = () => setStatus("live", "live");
    source.onerror = () => setStatus("down", "reconnecting…");
    state.source = source;
  } else {
    setStatus("past", "past window");
    try {
      const q = new URLSearchParams({ limit: 100, window: state.window });
      renderPage(await api(`/v1/boards/${path(board)}?${q}`), false);
    } catch (e) {
      $("top-caption").textContent = `${board} · ${state.window}`;
      $("top-body").replaceChildren(emptyRow(e.message));
    }
  }
  player.refresh();
}

$("window").addEventListener("change", (e) => showWindow(e.target.value));
$("window-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const id = $("window-id").value.trim();
  if (!id) return;
  if (![...$("window").options].some((o) => o.value === id)) $("window").append(el("option", { value: id, text: id }));
  $("window").value = id;
  showWindow(id);
});

// -- the top 100, with rows sliding to their new places (FLIP) ---------------------------

const emptyRow = (text) => el("tr", {}, el("td", { colspan: 3, class: "empty", text }));

function row(entry) {
  const tr = el("tr", { "data-player": entry.playerId });
  tr.points = null;
  return tr;
}

function fill(tr, e) {
  const rank = el("td", { class: `num rank r${Math.min(e.rank, 4)}`, text: fmt(e.rank) });
  const points = el("td", { class: "num points", text: fmt(e.points) });
  if (tr.points !== null && e.points !== tr.points) {
    points.append(el("span", { class: "gain", text: `+${fmt(e.points - tr.points)}` }));
    tr.classList.remove("flash");
    void tr.offsetWidth; // restart the highlight animation
    tr.classList.add("flash");
  }
  tr.points = e.points;
  tr.replaceChildren(rank, playerCell(e), points);
}

function renderPage(page, live) {
  if (live && page.window !== state.board.currentWindow) {
    state.board.currentWindow = page.window; // a rollover: the stream follows the new window
  }
  $("top-caption").textContent = `${state.board.name} · ${page.window} · top ${page.entries.length}`;
  if (live) setStatus("live", "live", `updated ${clock(page.asOf)}`);
  if (page.entries.length) player.boardHasPlayers();
  const body = $("top-body");
  const before = new Map();
  for (const [id, tr] of state.rows) before.set(id, tr.getBoundingClientRect().top);
  const rows = new Map();
  for (const e of page.entries) {
    const tr = state.rows.get(e.playerId) || row(e);
    fill(tr, e);
    rows.set(e.playerId, tr);
  }
  state.rows = rows;
  body.replaceChildren(...(rows.size ? rows.values() : [emptyRow("No results in this window yet.")]));
  if (!MOTION || !before.size) return; // the first page just appears
  for (const [id, tr] of rows) {
    const was = before.get(id);
    const delta = was === undefined ? null : was - tr.getBoundingClientRect().top;
    if (delta === null) tr.animate([{ opacity: 0 }, { opacity: 1 }], { duration: 400 });
    else if (Math.abs(delta) > 1) {
      tr.animate([{ transform: `translateY(${delta}px)` }, { transform: "none" }], {
        duration: 600,
        easing: "cubic-bezier(.2,.8,.2,1)",
      });
    }
  }
}

async function main() {
  player = initPlayer(context);
  try {
    state.boards = (await api("/v1/boards")).boards;
  } catch (e) {
    setStatus("down", `cannot reach the API: ${e.message}`);
    return;
  }
  if (!state.boards.length) {
    setStatus("down", "this server has no boards configured");
    return;
  }
  renderTabs();
  const wanted = decodeURIComponent(location.hash.slice(1));
  selectBoard(state.boards.some((b) => b.name === wanted) ? wanted : state.boards[0].name);
}

main();
