// The board page: a tab per board, the live top 100 over Server-Sent Events (rows slide to
// their new places), past windows on demand, and the player panel (player.js). A board split
// by country is shown one group at a time: picked from the board's groups, or the group of
// the player looked up.

import { api, clock, el, fmt, path, playerCell } from "./dom.js";
import { describeRank, initPlayer, showRank } from "./player.js";
import { countdown, scheduledBefore, windowsBefore } from "./windows.js";

const PAST_WINDOWS = 6;
const COUNTDOWN_MS = 15000; // how often the countdown is redrawn (it shows minutes)
const MOTION = !window.matchMedia("(prefers-reduced-motion: reduce)").matches;
const $ = (id) => document.getElementById(id);

const state = { boards: [], board: null, window: null, group: null, source: null, rows: new Map(), shown: 0 };
const grouped = () => Boolean(state.board.groupBy);
const context = () => ({
  board: state.board.name,
  window: state.window,
  grouped: grouped(),
  group: grouped() ? state.group : null,
});
const groupOf = (windowId) => (windowId || "").split("@")[1] || null; // 2026-W44@FR -> FR
const baseOf = (windowId) => (windowId || "").split("@")[0];
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

function selectBoard(name, group = null) {
  const board = state.boards.find((b) => b.name === name) || state.boards[0];
  if (board !== state.board) state.group = null; // a group belongs to its board
  state.board = board;
  if (group) state.group = group;
  for (const tab of $("tabs").children) {
    const on = tab.id === `tab-${state.board.name}`;
    tab.setAttribute("aria-selected", String(on));
    tab.tabIndex = on ? 0 : -1;
  }
  $("panel").setAttribute("aria-labelledby", `tab-${state.board.name}`);
  setHash();
  $("group-box").hidden = !grouped();
  const scheduled = state.board.window === "schedule";
  const current = state.board.currentWindow;
  const ids = scheduled ? scheduledBefore(current, [], 1) : windowsBefore(state.board.window, current, PAST_WINDOWS);
  listWindows(current, ids);
  if (scheduled) listScheduled(state.board);
  $("window-id").placeholder = current || "";
  drawCountdown();
  showWindow(null);
}

// The picker: the live window first (value ""; "none open" between a schedule's windows),
// then the ones before it.
function listWindows(current, ids) {
  const past = current ? ids.slice(1) : ids;
  $("window").replaceChildren(
    el("option", { value: "", text: current ? `${current} (live)` : "none open" }),
    ...past.map((id) => el("option", { value: id, text: id })),
  );
}

// A schedule board's past windows, as the server lists them (cron is not read here).
async function listScheduled(board) {
  let listed = [];
  try {
    listed = (await api(`/v1/boards/${path(board.name)}/windows?limit=${PAST_WINDOWS}`)).windows;
  } catch {
    return; // the live window is still there to pick
  }
  if (board !== state.board) return; // another tab was picked meanwhile
  const chosen = $("window").value;
  listWindows(board.currentWindow, scheduledBefore(board.currentWindow, listed, PAST_WINDOWS));
  if ([...$("window").options].some((o) => o.value === chosen)) $("window").value = chosen;
}

// -- the countdown: when the current window ends, or the next opens ------------------------

let timesAsked = 0;

function drawCountdown() {
  const b = state.board;
  if (!b) return;
  const now = Date.now();
  const ends = b.currentWindow && b.endsAt ? Date.parse(b.endsAt) : null;
  const opens = !b.currentWindow && b.nextStartsAt ? Date.parse(b.nextStartsAt) : null;
  let text = "";
  if (ends !== null) text = `live window ends in ${countdown(ends - now)}`;
  else if (opens !== null) text = `next window opens in ${countdown(opens - now)}`;
  $("countdown").textContent = text;
  // Past the time it counted to: the boards' times are asked for again (once a minute at most).
  if ((ends ?? opens ?? Infinity) <= now && now - timesAsked > 60000) {
    timesAsked = now;
    refreshTimes();
  }
}

async function refreshTimes() {
  let boards;
  try {
    boards = (await api("/v1/boards")).boards;
  } catch {
    return;
  }
  for (const b of boards) {
    const mine = state.boards.find((x) => x.name === b.name);
    if (!mine) continue;
    const opened = !mine.currentWindow && b.currentWindow;
    Object.assign(mine, { currentWindow: b.currentWindow, endsAt: b.endsAt, nextStartsAt: b.nextStartsAt });
    if (opened && mine === state.board && !state.window) selectBoard(mine.name, state.group); // now live
  }
  drawCountdown();
}

setInterval(drawCountdown, COUNTDOWN_MS);

// #week, or #nations@FR on a board split by country: a link to this board (and group).
function setHash() {
  const group = grouped() && state.group ? `@${state.group}` : "";
  history.replaceState(null, "", `#${encodeURIComponent(state.board.name)}${group}`);
}

// -- the group shown, on a board split by country -------------------------------------------

// The board's groups in the window shown, as options with their players; the group shown
// is kept even when the list does not have it (a player's own group with nobody else yet).
// With none picked, the group with the most players is shown, so that the tab is live at once.
async function loadGroups() {
  const board = state.board;
  const q = new URLSearchParams();
  if (state.window) q.set("window", state.window);
  let groups = [];
  try {
    groups = (await api(`/v1/boards/${path(board.name)}/groups?${q}`)).groups;
  } catch (e) {
    $("top-caption").textContent = `${board.name} · groups unavailable: ${e.message}`;
  }
  if (board !== state.board) return false; // another tab was picked meanwhile
  if (!state.group && groups.length) state.group = groups[0].group;
  const options = groups.map((g) =>
    el("option", { value: g.group, text: `${g.group} · ${fmt(g.players)} ${g.players === 1 ? "player" : "players"}` }),
  );
  if (state.group && !groups.some((g) => g.group === state.group)) {
    options.unshift(el("option", { value: state.group, text: state.group }));
  }
  if (!state.group) options.unshift(el("option", { value: "", text: groups.length ? "pick a group" : "no groups yet" }));
  $("group").replaceChildren(...options);
  $("group").value = state.group || "";
  return true;
}

function selectGroup(group) {
  if (!group || group === state.group) return;
  state.group = group;
  if (![...$("group").options].some((o) => o.value === group)) {
    $("group").append(el("option", { value: group, text: group }));
  }
  $("group").value = group;
  setHash();
  showWindow(state.window);
}

$("group").addEventListener("change", (e) => selectGroup(e.target.value));

// -- the window shown: the current one live, or a past one read once -----------------------

async function showWindow(windowId) {
  const shown = ++state.shown; // a later call (another tab, window or group) wins
  state.window = windowId || null;
  state.source?.close();
  state.source = null;
  state.rows.clear();
  $("top-body").replaceChildren();
  const board = state.board.name;
  if (grouped() && (!(await loadGroups()) || shown !== state.shown)) return;
  if (grouped() && !state.group) {
    setStatus("idle", "pick a group");
    $("top-caption").textContent = `${board} · split by ${state.board.groupBy}`;
    $("top-body").replaceChildren(emptyRow("Pick a group, or find a player to see theirs."));
    player.refresh();
    return;
  }
  setHash();
  const group = grouped() ? { group: state.group } : {};
  if (!state.window && !state.board.currentWindow) {
    // Between a schedule's windows (or before the first season): nothing is live.
    const opens = state.board.nextStartsAt;
    setStatus("idle", "no window open");
    $("top-caption").textContent = `${board} · no window open`;
    const when = opens ? `: the next opens ${new Date(opens).toUTCString()}` : "";
    $("top-body").replaceChildren(emptyRow(`No window is open${when}. Pick a past one to see it.`));
  } else if (!state.window) {
    $("window").value = "";
    setStatus("connecting", "connecting…");
    const q = new URLSearchParams(group);
    const source = new EventSource(`/v1/boards/${path(board)}/stream${grouped() ? `?${q}` : ""}`);
    // Frames are drawn once per animation frame, the newest only: a device slower than the
    // stream (a busy phone, a loaded test machine) skips frames instead of queueing them,
    // which would hold every other task of the page (a look-up's answer) behind the backlog.
    let latest = null;
    source.onmessage = (e) => {
      const idle = latest === null;
      latest = e.data;
      if (!idle) return;
      requestAnimationFrame(() => {
        const data = latest;
        latest = null;
        if (state.source === source) renderPage(JSON.parse(data), true);
      });
    };
    source.onopen = () => setStatus("live", "live");
    source.onerror = () => setStatus("down", "reconnecting…");
    state.source = source;
  } else {
    setStatus("past", "past window");
    try {
      const q = new URLSearchParams({ limit: 100, window: state.window, ...group });
      renderPage(await api(`/v1/boards/${path(board)}?${q}`), false);
    } catch (e) {
      $("top-caption").textContent = `${board} · ${state.window}${grouped() ? `@${state.group}` : ""}`;
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
  // A row whose rank, points and profile did not change keeps its cells: rebuilt on every
  // frame of a busy stream, its name's button would be a new one each time, and a click
  // on it (a person's or a test's) could land on one already gone.
  const sig = JSON.stringify([e.rank, e.points, e.name, e.avatar]);
  if (tr.sig === sig) return;
  tr.sig = sig;
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
  if (live && grouped() && groupOf(page.window) !== state.group) return; // a stream just left
  if (live && baseOf(page.window) !== state.board.currentWindow) {
    state.board.currentWindow = baseOf(page.window); // a rollover: the stream follows it
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
  // A player looked up on a board split by country: show their group, live.
  player = initPlayer(context, (windowId) => grouped() && selectGroup(groupOf(windowId)));
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
  const [wanted, group] = decodeURIComponent(location.hash.slice(1)).split("@");
  const known = state.boards.some((b) => b.name === wanted);
  selectBoard(known ? wanted : state.boards[0].name, known && /^[A-Z]{2}$/.test(group || "") ? group : null);
}

main();
