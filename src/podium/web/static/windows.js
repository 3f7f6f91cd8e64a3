// Window ids of the windows before a current one, in the server's formats (README: a season
// S1, S2, ...; a month 2026-11; an ISO week 2026-W44; a UTC day 2026-10-28; all-time all).
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
