// Window ids of the windows before a current one, in the server's formats (README: a season
// S1, S2, ...; a month 2026-11; an ISO week 2026-W44; a UTC day 2026-10-28; all-time all;
// a scheduled window its start, 20261204T1800, listed by the server: scheduledBefore).
// All arithmetic is in UTC so the ids match the server's whatever the browser's zone.

const DAY = 86400000;
const pad = (n) => String(n).padStart(2, "0");

export function isoWeekId(ms) {
  const d = new Date(ms);
  const weekday = d.getUTCDay() || 7; // Monday 1 .. Sunday 7
  const thursday = new Date(ms + (4 - weekday) * DAY); // its week's year is the ISO year
  const year = thursday.getUTCFullYear();
  const week = Math.floor((thursday - Date.UTC(year, 0, 1)) / DAY / 7) + 1;
  return `${year}-W${pad(week)}`;
}

export function isoWeekStart(year, week) {
  const jan4 = Date.UTC(year, 0, 4); // always in week 1
  const weekday = new Date(jan4).getUTCDay() || 7;
  return jan4 - (weekday - 1) * DAY + (week - 1) * 7 * DAY;
}

// [current, the one before, ...]: up to `count` ids; fewer when the windows run out
// (seasons start at S1; all-time has only itself). An id not of the kind gives just itself.
export function windowsBefore(kind, current, count) {
  const out = [];
  let m;
  if (kind === "week" && (m = /^(\d{4})-W(\d{2})$/.exec(current))) {
    const monday = isoWeekStart(+m[1], +m[2]);
    for (let k = 0; k < count; k++) out.push(isoWeekId(monday - k * 7 * DAY));
  } else if (kind === "day" && /^\d{4}-\d{2}-\d{2}$/.test(current)) {
    const start = Date.parse(`${current}T00:00:00Z`);
    for (let k = 0; k < count; k++) out.push(new Date(start - k * DAY).toISOString().slice(0, 10));
  } else if (kind === "month" && (m = /^(\d{4})-(\d{2})$/.exec(current))) {
    const months = +m[1] * 12 + (+m[2] - 1);
    for (let k = 0; k < count; k++) {
      const n = months - k;
      out.push(`${Math.floor(n / 12)}-${pad((n % 12) + 1)}`);
    }
  } else if (kind === "season" && (m = /^S(\d+)$/.exec(current))) {
    for (let n = +m[1]; n >= 1 && out.length < count; n--) out.push(`S${n}`);
  } else if (current) {
    out.push(current);
  }
  return out;
}

// A schedule board's windows ("0 18 * * FRI": 20261204T1800, ...) are not worked out here:
// cron is read once, by the server, and its list of the board's windows (newest first,
// GET /v1/boards/{board}/windows) names them. [current, the listed ones before it]: up to
// `count` ids, without the current one twice; none is current between two windows.
export function scheduledBefore(current, listed, count) {
  const ids = current ? [current] : [];
  for (const w of listed) {
    if (ids.length >= count) break;
    if (!ids.includes(w.id)) ids.push(w.id);
  }
  return ids;
}

// The time until a window ends or opens, as a countdown shows it: "2 d 4 h", "3 h 12 min",
// "12 min", "under a minute". Rounded down, so that it never says more time is left.
export function countdown(ms) {
  const minutes = Math.floor(Math.max(0, ms) / 60000);
  const d = Math.floor(minutes / 1440);
  const h = Math.floor((minutes % 1440) / 60);
  const m = minutes % 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  return m ? `${m} min` : "under a minute";
}
