// Tournaments: listed, created (the API's validation messages shown field by field), ended
// early (confirmed by typing the id), with their runs and standings.

import { call, enc } from "./api.js";
import { fmt } from "../dom.js";
import { act, card, confirmTyped, el, kv, notice, readonly, table, when } from "./ui.js";

export async function show(root, ctx, id) {
  if (ctx.canWrite) root.append(createCard(ctx));
  else root.append(card("Create a tournament", readonly("creating or ending a tournament")));
  const { tournaments } = await call("GET", "/v1/tournaments", { query: { limit: 100 } });
  root.append(
    card(
      "Tournaments",
      table(
        `${tournaments.length} tournaments by start`,
        ["Title", "Id", "State", "Starts", "Ends", "Entrants#", ""],
        tournaments.map((t) => [
          t.title,
          t.id,
          t.state,
          when(t.startsAt),
          when(t.endedAt || t.endsAt),
          fmt(t.entrants),
          el("button", { type: "button", text: "Open", "aria-label": `Open tournament ${t.id}`, onclick: () => ctx.go("tournaments", t.id) }),
        ]),
        "no tournament yet",
      ),
    ),
  );
  if (id) root.append(await detail(ctx, id));
}

async function detail(ctx, id) {
  const t = await call("GET", `/v1/tournaments/${enc(id)}`);
  const box = card(`Tournament ${t.title}`);
  box.dataset.tournament = t.id;
  box.append(
    kv([
      ["Id", t.id],
      ["State", t.state],
      ["Modes", t.modes.join(", ")],
      ["Rule", `${t.aggregate}, ${t.order}, ties ${t.ties}`],
      ["Starts", when(t.startsAt)],
      ["Ends", when(t.endsAt)],
      ["Ended early", t.endedAt ? when(t.endedAt) : null],
      ["Schedule", t.schedule ? `${t.schedule}, ${t.durationSeconds} s a run` : null],
      ["Entrants", `${fmt(t.entrants)}${t.maxEntrants ? ` of ${fmt(t.maxEntrants)}` : ""}${t.joinRequired ? ", joining required" : ""}`],
      ["Attempts", t.maxAttempts],
      ["Category", t.category],
      ["Metadata", t.metadata ? el("code", { class: "meta", text: JSON.stringify(t.metadata) }) : null],
    ]),
  );
  if (t.run) {
    const page = await call("GET", `/v1/tournaments/${enc(id)}/board`, { query: { limit: 50 } });
    box.append(
      table(
        `standings of run ${t.run}`,
        ["Rank#", "Player", "Points#"],
        page.entries.map((e) => [fmt(e.rank), e.name ? `${e.name} (${e.playerId})` : e.playerId, fmt(e.points)]),
        "no result counted yet",
      ),
    );
    const { windows } = await call("GET", `/v1/tournaments/${enc(id)}/runs`, { query: { limit: 20 } });
    box.append(
      table(
        "runs, newest first",
        ["Run", "State", "Players#", "Start", "End", ""],
        windows.map((w) => [w.id, w.state, w.players === undefined ? "–" : fmt(w.players), when(w.start), when(w.end), w.standings ? el("a", { href: w.standings, download: "", text: "Download standings" }) : ""]),
        "no run yet",
      ),
    );
  }
  if (ctx.canWrite) box.append(await entrants(ctx, t));
  if (ctx.canWrite && t.state !== "ended") {
    box.append(
      confirmTyped({
        what: `Ending ${t.title} now closes it as if its time were up: its run takes no result after this and freezes into final standings.`,
        expected: t.id,
        button: "End now",
        onConfirm: async () => {
          await call("DELETE", `/v1/admin/tournaments/${enc(t.id)}`);
          notice(`${t.id} is ended`);
          await ctx.go("tournaments", t.id);
        },
      }),
    );
  }
  return box;
}

// Who joined (the first 500, by id), each removable: the place is free again and, where
// joining is required, their results no longer count there.
async function entrants(ctx, t) {
  const { entrants: list, next } = await call("GET", `/v1/admin/tournaments/${enc(t.id)}/entrants`, { query: { limit: 500 } });
  const removing = el("div");
  const remove = (playerId) =>
    el("button", {
      type: "button",
      class: "danger",
      text: "Remove…",
      "aria-label": `Remove entrant ${playerId}`,
      onclick: () =>
        removing.replaceChildren(
          confirmTyped({
            what: `Removing ${playerId} frees their place in ${t.title}${t.joinRequired ? " and stops their results counting there (what they scored stays)" : ""}.`,
            expected: playerId,
            button: "Remove",
            onConfirm: async () => {
              await call("DELETE", `/v1/admin/tournaments/${enc(t.id)}/entrants/${enc(playerId)}`);
              notice(`${playerId} is no longer an entrant of ${t.id}`);
              await ctx.go("tournaments", t.id);
            },
          }),
        ),
    });
  return el(
    "div",
    {},
    table(
      `entrants${next ? " (the first 500 by id)" : ""}`,
      ["Player", "Joined", ""],
      list.map((e) => [e.playerId, when(e.joinedAt), remove(e.playerId)]),
      "nobody joined",
    ),
    removing,
  );
}

// The form holds every field of the API's tournament (POST /v1/admin/tournaments) and sends
// what is typed; the API checks it, and each field it names is marked where it is typed, with
// the API's own words beside it (a 422's errors, or a rule no schema can state: its detail
// begins with the field's name). The alert above says them all as well.
const NUMBERS = ["durationSeconds", "maxEntrants", "maxAttempts"];

function createCard(ctx) {
  const input = (name, attrs = {}) => el("input", { name, type: "text", autocomplete: "off", ...attrs });
  const choice = (name, values) => el("select", { name }, ...values.map((v) => el("option", { value: v, text: v })));
  const f = {
    id: input("id", { required: true }),
    title: input("title", { required: true }),
    modes: input("modes", { required: true, value: "default" }),
    aggregate: choice("aggregate", ["sum", "best", "last"]),
    order: choice("order", ["desc", "asc"]),
    ties: choice("ties", ["first", "shared"]),
    startsAt: input("startsAt", { placeholder: "2026-12-04T18:00:00Z" }),
    endsAt: input("endsAt", { placeholder: "2026-12-06T18:00:00Z" }),
    schedule: input("schedule", { placeholder: "0 18 * * FRI" }),
    durationSeconds: input("durationSeconds", { inputmode: "numeric" }),
    maxEntrants: input("maxEntrants", { inputmode: "numeric" }),
    maxAttempts: input("maxAttempts", { inputmode: "numeric" }),
    category: input("category"),
    metadata: el("textarea", { name: "metadata", rows: 2, spellcheck: "false", placeholder: '{"prize": "skin"}' }),
    joinRequired: el("input", { name: "joinRequired", type: "checkbox" }),
  };
  const said = {};
  const labelled = (label, name) => {
    said[name] = el("span", { class: "field-error", id: `tournament-${name}-error` });
    f[name].setAttribute("aria-describedby", said[name].id);
    return el("label", {}, label, f[name], said[name]);
  };
  const submit = el("button", { type: "submit", text: "Create tournament" });
  const form = el(
    "form",
    { class: "stack", id: "create-tournament", novalidate: true },
    el(
      "div",
      { class: "grid2" },
      labelled("Id", "id"),
      labelled("Title", "title"),
      labelled("Modes (comma separated)", "modes"),
      labelled("Aggregate", "aggregate"),
      labelled("Order (desc: more points first)", "order"),
      labelled("Ties (first to reach, or shared ranks)", "ties"),
      labelled("Starts at (RFC 3339, UTC)", "startsAt"),
      labelled("Ends at (RFC 3339, UTC)", "endsAt"),
      labelled("Schedule (cron, UTC; recurring runs)", "schedule"),
      labelled("Run length in seconds (with a schedule)", "durationSeconds"),
      labelled("Most entrants", "maxEntrants"),
      labelled("Attempts that count per player", "maxAttempts"),
      labelled("Category", "category"),
      labelled("Metadata (a JSON object)", "metadata"),
    ),
    el("label", { class: "inline" }, f.joinRequired, "Players must join"),
    el("div", {}, submit),
  );
  const mark = (problem) => {
    for (const [name, span] of Object.entries(said)) {
      span.textContent = "";
      f[name].removeAttribute("aria-invalid");
    }
    const found = problem && problem.status === 422 ? problem.fields || [] : [];
    for (const { field: path, message } of found) {
      const name = String(path).split(".")[0];
      if (!said[name]) continue;
      said[name].textContent = said[name].textContent ? `${said[name].textContent}; ${message}` : message;
      f[name].setAttribute("aria-invalid", "true");
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const body = {
      id: f.id.value.trim(),
      title: f.title.value,
      modes: f.modes.value.split(",").map((m) => m.trim()).filter(Boolean),
      aggregate: f.aggregate.value,
      order: f.order.value,
      ties: f.ties.value,
      joinRequired: f.joinRequired.checked,
    };
    for (const name of ["startsAt", "endsAt", "schedule", "category"]) {
      const v = f[name].value.trim();
      if (v) body[name] = v;
    }
    // A number when it reads as one; otherwise as typed, for the API to name the field.
    for (const name of NUMBERS) {
      const v = f[name].value.trim();
      if (v) body[name] = /^\d+$/.test(v) ? Number(v) : v;
    }
    // JSON when it reads as JSON; otherwise the text itself, which the API refuses by name.
    const meta = f.metadata.value.trim();
    if (meta) {
      try {
        body.metadata = JSON.parse(meta);
      } catch {
        body.metadata = meta;
      }
    }
    mark(null);
    act(submit, async () => {
      try {
        const t = await call("POST", "/v1/admin/tournaments", { body });
        await ctx.go("tournaments", t.id);
        notice(`${t.id} is made (${t.state})`);
      } catch (e) {
        mark(e);
        throw e;
      }
    });
  });
  return card("Create a tournament", form);
}
