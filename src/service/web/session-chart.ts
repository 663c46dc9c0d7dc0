// A tuning session's chart as inline SVG: the objective of each iteration (dots; failed ones as
// red crosses at the top), the best so far (a step line), and the baseline at 1.0 (dashed).
// Presentation attributes only: the Content-Security-Policy allows no inline style.
import { html, type Html } from './html.ts';

export interface ChartPoint {
  ordinal: number;
  objective: number | null;
  failed: boolean;
  bestSoFar: number | null;
}

const W = 960;
const H = 240;
const M = { left: 46, right: 14, top: 14, bottom: 30 };

export function sessionChart(points: readonly ChartPoint[], planned: number): Html {
  const measured = points.flatMap((p) => (p.objective !== null ? [p.objective] : []));
  const lo = Math.min(0.9, ...measured);
  const hi = Math.max(1.1, ...measured);
  const pad = (hi - lo) * 0.08;
  const yMin = lo - pad;
  const yMax = hi + pad;
  const n = Math.max(planned, points.length, 2);
  const x = (ordinal: number) => M.left + ((ordinal - 1) / (n - 1)) * (W - M.left - M.right);
  const y = (v: number) => M.top + (1 - (v - yMin) / (yMax - yMin)) * (H - M.top - M.bottom);
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

  return html`<svg class="session-chart" id="session-chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="objective per iteration: 1.0 is the baseline, lower is faster">
<rect x="${M.left}" y="${M.top}" width="${W - M.left - M.right}" height="${H - M.top - M.bottom}" fill="#fafbfc" stroke="#e2e5ea"/>
${ticks.map((v) => html`<text x="${M.left - 6}" y="${f(y(v) + 4)}" text-anchor="end" font-size="11" fill="#5d6778">${v.toFixed(2)}</text>`)}
${xTicks.map((t) => html`<text x="${f(x(t))}" y="${H - M.bottom + 16}" text-anchor="middle" font-size="11" fill="#5d6778">${t}</text>`)}
<text x="${W - M.right}" y="${H - 4}" text-anchor="end" font-size="11" fill="#5d6778">iteration</text>
<line x1="${M.left}" x2="${W - M.right}" y1="${f(y(1))}" y2="${f(y(1))}" stroke="#8a93a3" stroke-width="1.2" stroke-dasharray="5 4"/>
<text x="${M.left + 4}" y="${f(y(1) - 5)}" font-size="11" fill="#5d6778">baseline 1.0</text>
${bestPath ? html`<path d="${bestPath}" fill="none" stroke="#1d7a46" stroke-width="2"/>` : ''}
${points.map((p) => {
  if (p.failed || p.objective === null) {
    const cx = x(p.ordinal);
    const cy = M.top + 8;
    return html`<path d="M${f(cx - 4)},${f(cy - 4)} L${f(cx + 4)},${f(cy + 4)} M${f(cx - 4)},${f(cy + 4)} L${f(cx + 4)},${f(cy - 4)}" stroke="#b3261e" stroke-width="2"><title>iteration ${p.ordinal}: failed</title></path>`;
  }
  return html`<circle cx="${f(x(p.ordinal))}" cy="${f(y(p.objective))}" r="4" fill="#2f5bd3"><title>iteration ${p.ordinal}: ${p.objective.toFixed(3)}</title></circle>`;
})}
</svg>
<div class="legend muted"><span class="key dot"></span> objective of the iteration <span class="key best"></span> best so far <span class="key base"></span> baseline (1.0; lower is faster) <span class="key fail">×</span> failed</div>`;
}
