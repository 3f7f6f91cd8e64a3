// Small helpers shared by the pages: element building (never innerHTML with data from the
// API), number formats, avatars, and fetching JSON from the API with readable errors.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

const NUMBER = new Intl.NumberFormat("en-US");
export const fmt = (n) => NUMBER.format(n);

export function ordinal(n) {
  const tens = n % 100;
  const suffix =
    tens >= 11 && tens <= 13 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th";
  return `${fmt(n)}${suffix}`;
}

export function clock(iso) {
  const d = iso ? new Date(iso) : new Date();
  return d.toLocaleTimeString("en-GB", { hour12: false });
}

// A player's avatar: their image when it is one we may load (https, or the app's own
// files), otherwise (or when it fails to load) their initials on a colour of their own.
export function avatar(entry) {
  const fallback = () => {
    // "YarrowFox88" -> YF, "live_a" -> LA, "p_0193" -> P0
    const words = (entry.name || entry.playerId).split(/[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])/).filter(Boolean);
    const letters = words.length > 1 ? words[0][0] + words[1][0] : (words[0] || "?").slice(0, 2);
    let hash = 0;
    for (const ch of entry.playerId) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
    return el("span", {
      class: "avatar initials",
      style: `--hue:${hash % 360}`,
      "aria-hidden": "true",
      text: letters.toUpperCase(),
    });
  };
  const src = entry.avatar || "";
  if (!/^(https:\/\/|\/(?!\/))/.test(src)) return fallback();
  const img = el("img", { class: "avatar", src, alt: "", width: 28, height: 28, loading: "lazy" });
  img.addEventListener("error", () => img.replaceWith(fallback()), { once: true });
  return img;
}

// The player cell used by every table: avatar, name as a button that looks the player up,
// and the id in small print when the player has a name.
export function playerCell(entry) {
  const label = entry.name || entry.playerId;
  const button = el("button", {
    type: "button",
    class: "player-link",
    title: `Look up ${label}`,
    text: label,
    onclick: () => document.dispatchEvent(new CustomEvent("podium:player", { detail: entry.playerId })),
  });
  const id = entry.name ? el("span", { class: "pid", text: entry.playerId }) : null;
  const who = el("span", { class: "who" }, button, id);
  return el("td", { class: "player" }, el("div", { class: "player-box" }, avatar(entry), who));
}

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// GET (or anything else) a JSON document; a problem+json answer becomes an ApiError whose
// message is the problem's detail.
export async function api(path, options = {}) {
  const response = await fetch(path, { headers: { Accept: "application/json" }, ...options });
  if (!response.ok) {
    let detail = `${response.status} ${response.statusText}`;
    try {
      detail = (await response.json()).detail || detail;
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, detail);
  }
  return response.json();
}

export const path = (...parts) => parts.map(encodeURIComponent).join("/");
