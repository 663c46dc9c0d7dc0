// HTML built with a tagged template that escapes every interpolated value, so that nothing an
// agent or a person sent can become markup. Only Html values (made here) pass through as they are.

export class Html {
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  if (typeof value === 'string') return escapeHtml(value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return escapeHtml(String(value));
  // Anything else (a Date, a plain object) is a bug in a page: format it first.
  throw new TypeError(`cannot render a ${Object.prototype.toString.call(value)} in HTML`);
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(out);
}

/** Trusted markup written in this code base (never data). */
export function trusted(markup: string): Html {
  return new Html(markup);
}
