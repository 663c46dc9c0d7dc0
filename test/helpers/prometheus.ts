// A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: it throws
// on anything a Prometheus server would refuse, and returns each sample by its series.
// https://prometheus.io/docs/instrumenting/exposition_formats/

export interface Exposition {
  /** Each family's TYPE (counter, gauge, histogram, summary, untyped). */
  types: Map<string, string>;
  /** Each sample by series: `name` or `name{a="x",b="y"}` with labels sorted by name. */
  samples: Map<string, number>;
  /** A sample's value; throws when the series is not there. */
  value(name: string, labels?: Record<string, string>): number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
/** The suffixes a histogram's or summary's samples add to its family name. */
const SUFFIXES = ['_bucket', '_sum', '_count'];

export function seriesKey(name: string, labels: Record<string, string> = {}): string {
  const entries = Object.entries(labels).sort(([a], [b]) => a.localeCompare(b));
  return entries.length === 0 ? name : `${name}{${entries.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`;
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let rest = text;
  while (rest.length > 0) {
    const m = /^([^=,\s]+)="((?:[^"\\\n]|\\[\\"n])*)"(,?)/.exec(rest);
    if (!m || !LABEL.test(m[1]!)) throw new Error(`bad label set in: ${line}`);
    if (m[1]! in labels) throw new Error(`label ${m[1]} twice in: ${line}`);
    labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    rest = rest.slice(m[0].length);
    if (m[3] === '' && rest.length > 0) throw new Error(`labels not separated by commas in: ${line}`);
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const value = Number(text);
  if (text === '' || Number.isNaN(value)) throw new Error(`bad value in: ${line}`);
  return value;
}

export function parseExposition(text: string): Exposition {
  if (!text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) continue; // a plain comment
      const [, keyword, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
      if (keyword === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`unknown type in: ${line}`);
        if (types.has(name)) throw new Error(`TYPE twice for ${name}`);
        types.set(name, rest);
      } else {
        if (helps.has(name)) throw new Error(`HELP twice for ${name}`);
        helps.add(name);
      }
      continue;
    }
    const m = /^([^\s{]+)(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string];
    if (!NAME.test(name)) throw new Error(`bad metric name in: ${line}`);
    const family = types.has(name)
      ? name
      : SUFFIXES.map((s) => (name.endsWith(s) ? name.slice(0, -s.length) : '')).find((f) => f && types.has(f));
    if (!family) throw new Error(`sample before (or without) its TYPE line: ${line}`);
    const key = seriesKey(name, parseLabels(labelText ?? '', line));
    if (samples.has(key)) throw new Error(`series twice: ${key}`);
    samples.set(key, parseValue(valueText, line));
  }
  return {
    types,
    samples,
    value(name, labels = {}) {
      const key = seriesKey(name, labels);
      const value = samples.get(key);
      if (value === undefined) throw new Error(`no series ${key}; the exposition has: ${[...samples.keys()].join(', ')}`);
      return value;
    },
  };
}

/** Scrapes a /metrics address and parses what it answers (throws on anything but 200). */
export async function scrape(url: string, token?: string): Promise<Exposition> {
  const response = await fetch(url, { ...(token && { headers: { authorization: `Bearer ${token}` } }) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${url}: ${response.status} ${text.slice(0, 200)}`);
  if (!(response.headers.get('content-type') ?? '').startsWith('text/plain; version=0.0.4'))
    throw new Error(`GET ${url}: content-type ${response.headers.get('content-type')}`);
  return parseExposition(text);
}
