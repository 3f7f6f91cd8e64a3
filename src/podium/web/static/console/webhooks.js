// Webhooks: the endpoints, recent deliveries with state and attempts, failed ones with their
// last answer and a retry, and the failure rate over the last day.

import { call, enc } from "./api.js";
import { lineChart } from "../svg.js";
import { act, card, el, legend, notice, readonly, svgChart, table, when } from "./ui.js";

const PAGE = 500;
const PAGES = 4; // at most 2,000 deliveries read for the picture

export async function show(root, ctx) {
  if (!ctx.canWrite) {
    root.append(card("Webhooks", readonly("the webhook endpoints and deliveries")));
    return;
  }
  const { endpoints } = await call("GET", "/v1/admin/webhooks");
  root.append(
    card(
      "Endpoints",
      table(
        "the [[webhooks]] of the settings (secrets never shown)",
        ["Url", "Events", "Retried for (s)#"],
        endpoints.map((e) => [e.url, e.events.join(", "), e.retryForSeconds]),
        "no webhook is configured",
      ),
    ),
  );
  const all = await deliveries();
  const failed = all.filter((d) => d.state === "failed");
  root.append(
    card(
      "Failed deliveries",
      table(
        `${failed.length} given up on; a retry tries once more now`,
        ["Event", "Type", "Endpoint", "Attempts#", "Last answer", "First tried", ""],
        failed.map((d) => [
          el("code", { text: d.eventId }),
          d.type,
          d.endpoint,
          d.attempts,
          d.lastStatus ? `HTTP ${d.lastStatus}${d.lastError ? `: ${d.lastError}` : ""}` : d.lastError,
          when(d.firstAttemptAt),
          retryButton(ctx, d),
        ]),
        "no failed delivery",
      ),
    ),
  );
  root.append(rateCard(all));
  const recent = all.slice(-50).reverse();
  root.append(
    card(
      "Recent deliveries",
      table(
        "the latest 50, newest first",
        ["Event", "Type", "Endpoint", "State", "Attempts#", "Last status", "Next attempt", "Delivered"],
        recent.map((d) => [
          el("code", { text: d.eventId }),
          d.type,
          d.endpoint,
          el("span", { class: `state-${d.state}`, text: d.state }),
          d.attempts,
          d.lastStatus,
          when(d.nextAttemptAt),
          when(d.deliveredAt),
        ]),
        "nothing sent yet",
      ),
    ),
  );
}

// The newest deliveries: the list is oldest first, a page at a time; read forward, keep the
// last pages' worth.
async function deliveries() {
  let out = [];
  let cursor;
  for (let i = 0; ; i++) {
    const page = await call("GET", "/v1/admin/webhooks/deliveries", { query: { limit: PAGE, cursor } });
    out = out.concat(page.deliveries).slice(-PAGE * PAGES);
    cursor = page.next;
    if (!cursor || i > 200) return out;
  }
}

function retryButton(ctx, d) {
  const b = el("button", {
    type: "button",
    text: "Retry",
    "aria-label": `Retry ${d.eventId} to ${d.endpoint}`,
    onclick: () =>
      act(b, async () => {
        await call("POST", `/v1/admin/webhooks/deliveries/${enc(d.eventId)}/retry`, { body: { endpoint: d.endpoint } });
        await ctx.go("webhooks");
        notice(`${d.eventId} is due again: the delivery worker tries it now`);
      }),
  });
  return b;
}

// Delivered and failed deliveries per hour over the last 24, by when each was made.
function rateCard(all) {
  const now = Date.now() / 1000;
  const hours = 24;
  const sent = new Array(hours).fill(0);
  const lost = new Array(hours).fill(0);
  for (const d of all) {
    const age = Math.floor((now - Date.parse(d.firstAttemptAt) / 1000) / 3600);
    if (age < 0 || age >= hours) continue;
    if (d.state === "delivered") sent[hours - 1 - age]++;
    if (d.state === "failed") lost[hours - 1 - age]++;
  }
  const total = sent.reduce((a, b) => a + b, 0) + lost.reduce((a, b) => a + b, 0);
  const share = total ? Math.round((100 * lost.reduce((a, b) => a + b, 0)) / total) : 0;
  const svg = svgChart("webhook deliveries per hour, delivered and failed, last 24 hours");
  lineChart(
    svg,
    [
      { name: "delivered", points: sent.map((v, i) => [i, v]) },
      { name: "failed", points: lost.map((v, i) => [i, v]) },
    ],
    { span: hours - 1, width: 480, height: 150, left: "-24h", right: "now" },
  );
  return card(
    "Failure rate",
    el("p", { id: "failure-rate", text: total ? `${share}% failed of ${total} settled in the last 24 hours` : "nothing settled in the last 24 hours" }),
    el("figure", { class: "chart-figure" }, svg, legend(["delivered", "failed"]), el("figcaption", { text: "deliveries per hour, by when each was made" })),
  );
}
