// The console's one way to podium: the admin HTTP API, with the key from this tab's
// sessionStorage (never a URL, localStorage or a cookie). Every error becomes a Problem
// whose words are the problem+json's title and detail (and each field's message).

const KEY = "podium.console.key";

export const session = {
  get key() {
    return sessionStorage.getItem(KEY);
  },
  keep(key) {
    sessionStorage.setItem(KEY, key);
  },
  forget() {
    sessionStorage.removeItem(KEY);
  },
};

export class Problem extends Error {
  constructor(status, title, detail, errors = []) {
    super(detail);
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.errors = errors;
  }

  get words() {
    return this.status ? `${this.title} (${this.status}): ${this.detail}` : `${this.title}: ${this.detail}`;
  }
}

export const enc = encodeURIComponent;

// method, path (with its ids already encoded), an optional JSON body, query parameters and,
// for the sign-in's probes, a key other than the kept one. 204 and 202-without-body answer null;
// with `blob: true`, a success answers its body as a Blob (a download, never parsed here).
export async function call(method, path, options = {}) {
  // A read the server shed (503, Retry-After) is asked again a few times: reads change
  // nothing, and a console under a busy game should still show its pages. A write is never
  // repeated here; its 503 is shown (nothing was recorded, the operator may retry).
  for (let attempt = 0; ; attempt++) {
    try {
      return await once(method, path, options);
    } catch (e) {
      if (!(e instanceof Problem) || e.status !== 503 || method !== "GET" || attempt >= 4) throw e;
      const wait = Math.min(Math.max(Number(e.retryAfter) || 1, 0.2), 5);
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  }
}

async function once(method, path, { body, query, key, blob } = {}) {
  const headers = { Accept: "application/json" };
  const secret = key ?? session.key;
  if (secret) headers.Authorization = `Bearer ${secret}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const qs = query ? `?${new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== null && v !== ""))}` : "";
  let response;
  try {
    response = await fetch(path + qs, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
  } catch (e) {
    throw new Problem(0, "No answer", `podium did not answer (${e.message}); nothing was changed by this page`);
  }
  if (response.ok && blob) {
    try {
      return await response.blob();
    } catch (e) {
      throw new Problem(0, "Cut short", `podium's answer stopped before its end (${e.message}); nothing was saved`);
    }
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = (data && data.detail) || text.slice(0, 300) || response.statusText || "no detail";
    const title = (data && data.title) || response.statusText || "Error";
    const fields = data && Array.isArray(data.errors) ? data.errors.map((e) => ({ field: String(e.field), message: String(e.message) })) : [];
    const errors = fields.map((e) => `${e.field}: ${e.message}`);
    const problem = new Problem(response.status, title, detail, errors);
    // Each field at fault, for a form to mark where it is typed: the errors a schema found,
    // or a rule no schema can state, whose detail begins with the field's name ("endsAt: ...").
    const named = /^([A-Za-z][A-Za-z0-9]*): (.+)$/s.exec(detail);
    problem.fields = fields.length ? fields : named ? [{ field: named[1], message: named[2] }] : [];
    // The kept key stopped working (revoked meanwhile): the console signs out and says why.
    if (response.status === 401 && key === undefined) document.dispatchEvent(new CustomEvent("podium:refused", { detail: problem }));
    problem.retryAfter = response.headers.get("Retry-After");
    throw problem;
  }
  return data;
}

// Who a key belongs to, asked of the API itself: "admin", "ops", or a Problem in words.
export async function scopeOf(key) {
  try {
    await call("GET", "/v1/admin/keys", { key });
    return "admin";
  } catch (e) {
    if (!(e instanceof Problem) || e.status !== 403) throw e;
  }
  try {
    await call("GET", "/v1/admin/ops", { key });
    return "ops";
  } catch (e) {
    if (!(e instanceof Problem) || e.status !== 403) throw e;
  }
  throw new Problem(
    403,
    "Refused",
    "this is a game server's key: it submits match results and cannot use the console. Sign in with an admin key (or an ops key, read-only).",
  );
}
