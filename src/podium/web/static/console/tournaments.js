// Tournaments: listed, created (the API's validation messages shown field by field), ended
// early (confirmed by typing the id), with their runs and standings.

import { call, enc } from "./api.js";
import { fmt } from "../dom.js";
import { act, card, confirmTyped, el, field, kv, notice, readonly, table, when } from "./ui.js";

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

// The form sends what is typed; the API checks it, and its 422 names each field at fault.
function createCard(ctx) {
  const input = (name, attrs = {}) => el("input", { name, type: "text", autocomplete: "off", ...attrs });
  const f = {
    id: input("id", { required: true }),
    title: input("title", { required: true }),
    modes: input("modes", { required: true, value: "default" }),
    aggregate: el("select", { name: "aggregate" }, ...["sum", "best", "last"].map((v) => el("option", { value: v, text: v }))),
    startsAt: input("startsAt", { placeholder: "2026-12-04T18:00:00Z" }),
    endsAt: input("endsAt", { placeholder: "2026-12-06T18:00:00Z" }),
    maxAttempts: input("maxAttempts", { inputmode: "numeric" }),
    category: input("category"),
    joinRequired: el("input", { name: "joinRequired", type: "checkbox" }),
  };
  const submit = el("button", { type: "submit", text: "Create tournament" });
  const form = el(
    "form",
    { class: "stack", id: "create-tournament" },
    el(
      "div",
      { class: "grid2" },
      field("Id", f.id),
      field("Title", f.title),
      field("Modes (comma separated)", f.modes),
      field("Aggregate", f.aggregate),
      field("Starts at (RFC 3339, UTC)", f.startsAt),
      field("Ends at (RFC 3339, UTC)", f.endsAt),
      field("Attempts that count per player", f.maxAttempts),
      field("Category", f.category),
    ),
    el("label", { class: "inline" }, f.joinRequired, "Players must join"),
    el("div", {}, submit),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const body = {
      id: f.id.value.trim(),
      title: f.title.value,
      modes: f.modes.value.split(",").map((m) => m.trim()).filter(Boolean),
      aggregate: f.aggregate.value,
      joinRequired: f.joinRequired.checked,
    };
    if (f.startsAt.value.trim()) body.startsAt = f.startsAt.value.trim();
    if (f.endsAt.value.trim()) body.endsAt = f.endsAt.value.trim();
    if (f.category.value.trim()) body.category = f.category.value.trim();
    // A number when it reads as one; otherwise as typed, for the API to name the field.
    const attempts = f.maxAttempts.value.trim();
    if (attempts) body.maxAttempts = /^\d+$/.test(attempts) ? Number(attempts) : attempts;
    act(submit, async () => {
      const t = await call("POST", "/v1/admin/tournaments", { body });
      await ctx.go("tournaments", t.id);
      notice(`${t.id} is made (${t.state})`);
    });
  });
  return card("Create a tournament", form);
}
