// Keys: listed with scopes and modes, created (the secret shown once, copyable), revoked
// (confirmed by typing the key's id).

import { call, enc } from "./api.js";
import { act, card, confirmTyped, el, field, notice, readonly, table, when } from "./ui.js";

export async function show(root, ctx) {
  if (!ctx.canWrite) {
    root.append(card("Keys", readonly("the list of keys")));
    return;
  }
  const created = el("div", { id: "new-secret" });
  root.append(createCard(ctx, created), created);
  const { keys } = await call("GET", "/v1/admin/keys");
  root.append(
    card(
      "Keys",
      table(
        `${keys.length} keys; a secret is shown only once, when its key is made`,
        ["Id", "Name", "Scope", "Modes", "Created", "Revoked", ""],
        keys.map((k) => [
          el("code", { text: k.id }),
          k.name,
          k.scope,
          k.modes.join(", ") || (k.scope === "game" ? "none" : "–"),
          when(k.createdAt),
          when(k.revokedAt),
          k.revokedAt ? "" : revoke(ctx, k),
        ]),
      ),
    ),
  );
}

function revoke(ctx, k) {
  const holder = el("div");
  const open = el("button", {
    type: "button",
    class: "danger",
    text: "Revoke…",
    "aria-label": `Revoke key ${k.id}`,
    onclick: () => {
      open.hidden = true;
      holder.append(
        confirmTyped({
          what: `Revoking “${k.name}” (${k.scope}) refuses it at once here, and on every API process within its key cache time.`,
          expected: k.id,
          button: "Revoke",
          onConfirm: async () => {
            await call("DELETE", `/v1/admin/keys/${enc(k.id)}`);
            notice(`key ${k.id} is revoked`);
            await ctx.go("keys");
          },
        }),
      );
    },
  });
  holder.append(open);
  return holder;
}

function createCard(ctx, created) {
  const name = el("input", { name: "name", type: "text", required: true, maxlength: 64, autocomplete: "off" });
  const scope = el("select", { name: "scope" }, ...["game", "admin", "ops"].map((s) => el("option", { value: s, text: s })));
  const modes = el("input", { name: "modes", type: "text", autocomplete: "off", placeholder: "default, ranked-duo" });
  const submit = el("button", { type: "submit", text: "Create key" });
  const form = el(
    "form",
    { class: "stack", id: "create-key" },
    field("Name", name),
    field("Scope", scope),
    field("Modes a game server may submit (comma separated)", modes),
    el("div", {}, submit),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const body = { name: name.value, scope: scope.value, modes: modes.value.split(",").map((m) => m.trim()).filter(Boolean) };
    act(submit, async () => {
      const k = await call("POST", "/v1/admin/keys", { body });
      name.value = "";
      modes.value = "";
      await ctx.go("keys");
      // After the list is drawn again: the one place the secret is ever shown.
      document.getElementById("new-secret").replaceChildren(secretCard(k));
      notice(`key ${k.id} is made: copy its secret now, it is not shown again`);
    });
  });
  return card("Create a key", form);
}

function secretCard(k) {
  const secret = el("input", { id: "secret", class: "secret", type: "text", readonly: true, value: k.secret, "aria-label": `Secret of key ${k.id}` });
  const copy = el("button", {
    type: "button",
    text: "Copy",
    onclick: async () => {
      secret.select();
      try {
        await navigator.clipboard.writeText(k.secret);
        notice("the secret is copied");
      } catch {
        notice("select the secret and copy it (the browser refused the clipboard)");
      }
    },
  });
  const hide = el("button", { type: "button", text: "Done", onclick: () => card.remove() });
  const card = el(
    "section",
    { class: "card" },
    el("h2", { text: `Secret of ${k.name} (${k.scope})` }),
    el("p", { class: "help", text: "Shown this once: podium keeps only its hash." }),
    el("div", { class: "inline" }, secret, copy, hide),
  );
  return card;
}
