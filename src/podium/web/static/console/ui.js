// What every view of the console builds with: tables, cards, forms, the confirmation by
// typing, the alert and notice lines. Data from the API is only ever set as text.

import { el } from "../dom.js";
import { Problem } from "./api.js";

export { el };

export const when = (iso) => (iso ? iso.replace("T", " ").replace("Z", " UTC") : "–");
export const text = (v) => (v === null || v === undefined || v === "" ? "–" : String(v));

export function card(title, ...children) {
  return el("section", { class: "card" }, el("h2", { text: title }), ...children);
}

// headers: ["Name", ...] (a header ending in "#" is numeric); rows: arrays of cells, each a
// string, a number or a Node; an empty table says `empty`.
export function table(caption, headers, rows, empty = "nothing yet") {
  const num = headers.map((h) => h.endsWith("#"));
  const head = el("tr", {}, ...headers.map((h, i) => el("th", { scope: "col", class: num[i] ? "num" : null, text: h.replace(/#$/, "") })));
  const body = rows.length
    ? rows.map((r) => el("tr", {}, ...r.map((c, i) => el("td", { class: num[i] ? "num" : null }, c instanceof Node ? c : text(c)))))
    : [el("tr", {}, el("td", { class: "empty", colspan: headers.length, text: empty }))];
  return el("table", { class: "small-table" }, el("caption", { text: caption }), el("thead", {}, head), el("tbody", {}, ...body));
}

export function kv(pairs) {
  return el("dl", { class: "kv" }, ...pairs.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : text(v))]));
}

export function field(label, input) {
  return el("label", {}, label, input);
}

export function readonly(what) {
  return el("p", { class: "readonly", text: `Read-only: ${what} needs an admin key.` });
}

const $ = (id) => document.getElementById(id);

export function notice(message) {
  $("alert").replaceChildren();
  $("notice").textContent = message;
}

export function clear() {
  $("alert").replaceChildren();
  $("notice").textContent = "";
}

// An error in words: the problem's title, status and detail, and each field at fault.
export function fail(error) {
  $("notice").textContent = "";
  const p = error instanceof Problem ? error : new Problem(0, "Error", String(error && error.message ? error.message : error));
  const list = p.errors.length ? el("ul", {}, ...p.errors.map((e) => el("li", { text: e }))) : null;
  $("alert").replaceChildren(el("p", { text: p.words }), ...(list ? [list] : [])); // a null would show as "null"
}

// Runs an API call from a button: the button is busy meanwhile, errors are shown in words.
export async function act(button, fn) {
  if (button) button.disabled = true;
  try {
    return await fn();
  } catch (e) {
    fail(e);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

// A destructive action confirmed by typing `expected` (a player's id, a key's id): the
// button is enabled only once the field holds exactly that.
export function confirmTyped({ what, expected, button, onConfirm, extra = [] }) {
  const input = el("input", { type: "text", autocomplete: "off", spellcheck: "false", "aria-label": `Type ${expected} to confirm` });
  const go = el("button", { type: "submit", class: "danger", disabled: true, text: button });
  const form = el(
    "form",
    { class: "confirm stack" },
    el("p", { text: what }),
    ...extra,
    el("div", { class: "inline" }, el("span", { text: `Type ${expected} to confirm:` }), input, go),
  );
  input.addEventListener("input", () => {
    go.disabled = input.value !== expected;
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (input.value !== expected) return;
    await act(go, onConfirm);
  });
  return form;
}

export function svgChart(label) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  svg.setAttribute("class", "chart-svg");
  return svg;
}

// A chart's legend: each series' name beside a swatch of its colour (style.css's .s0 ...).
export function legend(names) {
  return el("ul", { class: "legend" }, ...names.map((n, i) => el("li", { class: `s${i}` }, el("span", { class: "swatch", "aria-hidden": "true" }), n)));
}
