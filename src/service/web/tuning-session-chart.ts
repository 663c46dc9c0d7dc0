// A tuning session's chart as inline SVG, one column per window: each trial's objective (runtime
// over the baseline's at the same time; dots with their 95 % interval, failed ones as red crosses
// at the top), the search's best so far (a step line), the baseline windows (grey squares: their
// runtime over the first's, which is the drift), the A/B windows of the candidate (hollow dots),
// contaminated windows (grey rings, not measurements), 1.0 (dashed), and where a verified step was
// kept (a green vertical line: the known-good configuration from there on). Presentation attributes
// only: the Content-Security-Policy allows no inline style.
import { html, type Html } from './html.ts';

export interface ChartPoint {
  ordinal: number;
  kind: 'trial' | 'baseline' | 'candidate';
  /** Objective (trial, candidate) or runtime over the first baseline's (baseline). */
  value: number | null;
  interval: { low: number; high: number } | null;
  failed: boolean;
  contaminated: boolean;
  bestSoFar: number | null;
}

/** A verified step kept after window `after`: the windows after it are judged against it. */
export interface ChartMark {
  after: number;
  label: string;
}

const W = 960;
const H = 240;
const M = { left: 46, right: 14, top: 14, bottom: 30 };

export function tuningSessionChart(points: readonly ChartPoint[], marks: readonly ChartMark[] = []): Html {
  const values = points.flatMap((p) =>
    p.value !== null && !p.contaminated ? [p.value, ...(p.interval ? [p.interval.low, p.interval.high] : [])] : [],
  );
  const lo = Math.max(0.05, Math.min(0.9, ...values));
  const hi = Math.min(5, Math.max(1.1, ...values));
  const pad = (hi - lo) * 0.08;
  const yMin = lo - pad;
  const yMax = hi + pad;
  const n = Math.max(...points.map((p) => p.ordinal), ...marks.map((m) => m.after + 1), 2);
  const x = (ordinal: number) => M.left + ((ordinal - 1) / (n - 1)) * (W - M.left - M.right);
  const y = (v: number) => M.top + (1 - (Math.min(Math.max(v, yMin), yMax) - yMin) / (yMax - yMin)) * (H - M.top - M.bottom);
  const f = (v: number) => v.toFixed(1);

  const ticks = [yMin + pad, 1, yMax - pad].filter((v, i, all) => all.findIndex((w) => Math.abs(w - v) < (yMax - yMin) * 0.06) === i);
  const xTicks = [...new Set([1, Math.ceil(n / 2), n])];
  const best = points.filter((p) => p.bestSoFar !== null);
  const bestPath = best
    .map((p, i) => {
      const prev = best[i - 1];
      const step = prev ? `L${f(x(p.ordinal))},${f(y(prev.bestSoFar!))} ` : 'M';
      return `${step}${prev ? 'L' : ''}${f(x(p.ordinal))},${f(y(p.bestSoFar!))}`;
    })
    .join(' ');

  const mark = (p: ChartPoint): Html => {
    const cx = x(p.ordinal);
    if (p.failed) {
      const cy = M.top + 8;
      return html`<path d="M${f(cx - 4)},${f(cy - 4)} L${f(cx + 4)},${f(cy + 4)} M${f(cx - 4)},${f(cy + 4)} L${f(cx + 4)},${f(cy - 4)}" stroke="#b3261e" stroke-width="2"><title>window ${p.ordinal}: failed</title></path>`;
    }
    if (p.value === null) return html``;
    const cy = y(p.value);
    if (p.contaminated)
      return html`<circle cx="${f(cx)}" cy="${f(cy)}" r="5" fill="none" stroke="#b0b6c0" stroke-width="1.5"><title>window ${p.ordinal}: contaminated, measured again</title></circle>`;
    if (p.kind === 'baseline')
      return html`<rect x="${f(cx - 4)}" y="${f(cy - 4)}" width="8" height="8" fill="#8a93a3"><title>baseline window ${p.ordinal}: runtime ${p.value.toFixed(3)} × the first baseline's</title></rect>`;
    const bar = p.interval
      ? html`<line x1="${f(cx)}" x2="${f(cx)}" y1="${f(y(p.interval.low))}" y2="${f(y(p.interval.high))}" stroke="#9fb3ea" stroke-width="2"/>`
      : '';
    const title = `window ${p.ordinal}: ${p.value.toFixed(3)}${p.interval ? ` (95 % ${p.interval.low.toFixed(3)}–${p.interval.high.toFixed(3)})` : ''}`;
    return p.kind === 'candidate'
      ? html`${bar}<circle cx="${f(cx)}" cy="${f(cy)}" r="4" fill="#fff" stroke="#2f5bd3" stroke-width="2"><title>A/B ${title}</title></circle>`
      : html`${bar}<circle cx="${f(cx)}" cy="${f(cy)}" r="4" fill="#2f5bd3"><title>trial ${title}</title></circle>`;
  };

  return html`<svg class="session-chart" id="session-chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="objective per window: 1.0 is the baseline at the same time, lower is better; grey squares are the baseline windows (the drift)">
<rect x="${M.left}" y="${M.top}" width="${W - M.left - M.right}" height="${H - M.top - M.bottom}" fill="#fafbfc" stroke="#e2e5ea"/>
${ticks.map((v) => html`<text x="${M.left - 6}" y="${f(y(v) + 4)}" text-anchor="end" font-size="11" fill="#5d6778">${v.toFixed(2)}</text>`)}
${xTicks.map((t) => html`<text x="${f(x(t))}" y="${H - M.bottom + 16}" text-anchor="middle" font-size="11" fill="#5d6778">${t}</text>`)}
<text x="${W - M.right}" y="${H - 4}" text-anchor="end" font-size="11" fill="#5d6778">window</text>
<line x1="${M.left}" x2="${W - M.right}" y1="${f(y(1))}" y2="${f(y(1))}" stroke="#8a93a3" stroke-width="1.2" stroke-dasharray="5 4"/>
<text x="${M.left + 4}" y="${f(y(1) - 5)}" font-size="11" fill="#5d6778">baseline 1.0</text>
${marks.map((m) => {
  const mx = f(x(m.after + 0.5));
  return html`<g class="kept-mark"><line x1="${mx}" x2="${mx}" y1="${M.top}" y2="${H - M.bottom}" stroke="#1d7a46" stroke-width="1.5" stroke-dasharray="2 3"/><text x="${f(x(m.after + 0.5) + 4)}" y="${M.top + 12}" font-size="11" fill="#1d7a46">${m.label}</text><title>${m.label}: the known-good configuration from window ${m.after + 1} on</title></g>`;
})}
${bestPath ? html`<path d="${bestPath}" fill="none" stroke="#1d7a46" stroke-width="2"/>` : ''}
${points.map(mark)}
</svg>
<div class="legend muted"><span class="key dot"></span> trial's objective, with its 95 % interval <span class="key best"></span> best so far (not verified) <span class="key square"></span> baseline window (runtime over the first's: the drift${marks.length > 0 ? ', and after a kept step its gain' : ''}) <span class="key ring"></span> A/B window of the candidate <span class="key base"></span> 1.0, lower is better <span class="key fail">×</span> failed${marks.length > 0 ? html` <span class="key kept"></span> a verified step kept` : ''}</div>`;
}
