// The admin console: sign in with a key (kept in this tab's sessionStorage only), learn its
// scope from the API, then one view at a time. An admin key acts; an ops key reads the same
// views with no action offered (and the API would refuse one anyway); a game server's key
// is refused with words.

import { Problem, call, scopeOf, session } from "./api.js";
import { clear, fail } from "./ui.js";
import * as boards from "./boards.js";
import * as keys from "./keys.js";
import * as players from "./players.js";
import * as tournaments from "./tournaments.js";
import * as webhooks from "./webhooks.js";

const VIEWS = {
  players: players.show,
  review: players.review,
  keys: keys.show,
  boards: boards.show,
  tournaments: tournaments.show,
  webhooks: webhooks.show,
};
const $ = (id) => document.getElementById(id);
const ctx = { scope: null, canWrite: false, go };

function setStatus(kind, text) {
  $("status").dataset.state = kind;
  $("status-text").textContent = text;
}

// A view and its argument live in the fragment (#players/p_1): never the key.
async function go(view, arg = "") {
  const target = `#${view}${arg ? `/${encodeURIComponent(arg)}` : ""}`;
  if (location.hash !== target) history.replaceState(null, "", target);
  await render();
}

async function render() {
  if (!ctx.scope) return;
  const [name, raw] = location.hash.slice(1).split("/");
  const view = VIEWS[name] ? name : "players";
  const arg = raw ? decodeURIComponent(raw) : "";
  for (const b of document.querySelectorAll("#views button")) b.setAttribute("aria-pressed", String(b.dataset.view === view));
  const root = $("view");
  root.replaceChildren();
  root.dataset.view = view;
  try {
    await VIEWS[view](root, ctx, arg);
  } catch (e) {
    fail(e);
  }
}

function signedIn(scope) {
  ctx.scope = scope;
  ctx.canWrite = scope === "admin";
  document.body.dataset.scope = scope;
  $("login").hidden = true;
  $("session").hidden = false;
  $("views").hidden = false;
  $("who").textContent = scope === "admin" ? "Signed in with an admin key." : "Signed in with an ops key: read-only.";
  setStatus("live", scope === "admin" ? "admin" : "ops, read-only");
}

function signedOut(message) {
  ctx.scope = null;
  ctx.canWrite = false;
  delete document.body.dataset.scope;
  $("login").hidden = false;
  $("session").hidden = true;
  $("views").hidden = true;
  $("view").replaceChildren();
  setStatus("idle", message);
}

async function signIn(key) {
  setStatus("idle", "checking the key…");
  try {
    const scope = await scopeOf(key);
    session.keep(key);
    signedIn(scope);
    clear();
    await render();
  } catch (e) {
    session.forget();
    signedOut("the key was refused");
    if (e instanceof Problem && e.status === 401) fail(new Problem(401, e.title, `${e.detail}: the key is unknown or revoked`));
    else fail(e);
  }
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const key = $("key").value.trim();
  $("key").value = ""; // not left in the page
  if (key) signIn(key);
});
$("forget").addEventListener("click", () => {
  session.forget();
  clear();
  signedOut("signed out");
});
for (const b of document.querySelectorAll("#views button")) {
  b.addEventListener("click", () => {
    clear();
    go(b.dataset.view);
  });
}
window.addEventListener("hashchange", () => render());
document.addEventListener("podium:refused", (ev) => {
  if (!ctx.scope) return;
  session.forget();
  signedOut("the key was refused");
  fail(new Problem(401, ev.detail.title, `${ev.detail.detail}: the key is unknown or revoked; sign in again`));
});

if (session.key) signIn(session.key);
