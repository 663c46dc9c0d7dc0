// Sparklines as inline SVG: a trend at a glance, no script, no library.
import { html, type Html } from './html.ts';

export function sparkline(values: ReadonlyArray<number | null>, label: string): Html {
  const points = values.map((v, i) => [i, v] as const).filter((p): p is readonly [number, number] => p[1] !== null);
  if (points.length < 2) return html``;
  const width = 240;
  const height = 40;
  const max = Math.max(...points.map((p) => p[1]));
  const min = Math.min(...points.map((p) => p[1]));
  const span = max - min || 1;
  const step = width / Math.max(1, values.length - 1);
  const coords = points
    .map(([i, v]) => `${(i * step).toFixed(1)},${(height - 3 - ((v - min) / span) * (height - 6)).toFixed(1)}`)
    .join(' ');
  return html`<svg viewBox="0 0 ${width} ${height}" preserveAspectRatio="none" role="img" aria-label="${label}">
<polyline points="${coords}" fill="none" stroke="#2f5bd3" stroke-width="1.6" vector-effect="non-scaling-stroke"/></svg>`;
}
