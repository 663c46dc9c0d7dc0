// Secrets never reach a log line, an error message or any other output. Every secret the agent
// learns (from agent.yaml or the environment) is registered here, and everything the agent prints
// passes through `redact()`, the one masking function: known secret strings are masked wherever
// they appear, and so is every password written in a form a user might type it, known or not:
// the password part of a URL (spaces and all, valid URL or not), a libpq keyword/value
// `password=...` (quoted or not), a `password=` query parameter.
const secrets = new Set<string>();

export const MASK = '****';

/** Registers a secret value so that it is masked wherever it would be printed. */
export function registerSecret(value: string | undefined): void {
  if (!value) return;
  for (const form of [value, value.trim(), encodeURIComponent(value)]) {
    // Very short values would mask ordinary words; real passwords and keys are longer.
    if (form.length >= 4) secrets.add(form);
  }
}

/** `scheme://user:password@`: the password runs to the last `@` before the host's `/` or the
 * line's end, so that one with spaces or an unencoded `@` is masked whole. */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^/:@\s"']*):([^/\n]*)@/gi;
/** `password=secret`, `password = 'with spaces'`, `?sslmode=require&password=secret`. */
const KEYWORD_PASSWORD = /(\b(?:pg|ssl)?password\s*=\s*)('(?:[^'\\\n]|\\.)*'?|[^\s&"',;]+)/gi;

/** Every password written in a connection string, in whichever form it was typed. */
export function passwordsIn(connectionString: string): string[] {
  const found: string[] = [];
  try {
    const url = new URL(connectionString);
    if (url.password) found.push(url.password, safeDecode(url.password));
    const query = url.searchParams.get('password');
    if (query) found.push(query);
  } catch {
    // Not a URL that parses: the patterns below still find what it holds.
  }
  for (const m of connectionString.matchAll(URL_PASSWORD)) found.push(m[2]!);
  for (const m of connectionString.matchAll(KEYWORD_PASSWORD)) found.push(m[2]!.replace(/^'(.*)'$/s, '$1').replace(/\\(.)/g, '$1'));
  return found.filter((p) => p !== '');
}

/** Registers every password of a connection string, in every form it might be printed in. */
export function registerConnectionString(connectionString: string): void {
  for (const password of passwordsIn(connectionString)) registerSecret(password);
}

export function redact(text: string): string {
  let out = text;
  // Longest first, so that a secret containing another is masked whole.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) out = out.replaceAll(secret, MASK);
  return out.replace(URL_PASSWORD, `$1:${MASK}@`).replace(KEYWORD_PASSWORD, `$1${MASK}`);
}

/** A URL as it may be shown to a person: the password masked. */
export function showUrl(url: string): string {
  return redact(url);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
