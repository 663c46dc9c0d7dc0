// Secrets never reach a log line, an error message or any other output. Every secret the agent
// learns (from agent.yaml or the environment) is registered here, and everything the agent prints
// passes through `redact()`, the one masking function: known secret strings are masked wherever
// they appear, in each encoding they may be printed in (percent-encoded, JSON-escaped, escaped
// for libpq), and so is every password written in a form a user might type it, known or not:
// - the password of a URL's userinfo, whatever it holds (`/`, `@`, `:`, `#`, `?`, spaces): it
//   runs to the last `@` before the line's next URL, since an unencoded `@` may be part of it;
// - a libpq keyword value `password=...` (and `sslpassword`, `PGPASSWORD`): quoted with '...' or
//   "..." (backslash escapes, unterminated to the line's end), or unquoted up to an unescaped
//   space (`\ ` and commas included);
// - a `?password=` / `&password=` query parameter, up to the next `&`, `#` or space.
// Masking more than the password (a URL's port when a later `@` is on the same line) is the
// accepted price of never masking less.
const secrets = new Set<string>();
/** The secrets longest first, so that a secret containing another is masked whole; null when stale. */
let longestFirst: string[] | null = null;

export const MASK = '****';

/** A JSON string's content for `text`, as JSON.stringify prints it inside the quotes. */
const jsonEscaped = (text: string) => JSON.stringify(text).slice(1, -1);
/** `text` as typed in a libpq keyword value: quotes, backslashes and spaces escaped. */
const libpqEscaped = (text: string) => text.replace(/[\\'" ]/g, '\\$&');

/** The password as a WHATWG URL serializes it in userinfo (not quite encodeURIComponent). */
function userinfoEncoded(value: string): string {
  const url = new URL('http://host/');
  url.password = value;
  return url.password;
}

/** Registers a secret value so that it is masked wherever it would be printed. */
export function registerSecret(value: string | undefined): void {
  if (!value) return;
  for (const form of [value, value.trim(), encodeURIComponent(value), userinfoEncoded(value), libpqEscaped(value)]) {
    // Very short values would mask ordinary words; real passwords and keys are longer.
    for (const printed of [form, jsonEscaped(form)]) if (printed.length >= 4) secrets.add(printed);
  }
  longestFirst = null;
}

/** Forgets every registered secret (tests: each case starts from an empty registry). */
export function forgetSecrets(): void {
  secrets.clear();
  longestFirst = null;
}

/** `scheme://user:password@`: the password runs to the last `@` before the next URL on the line
 * (so that a message naming two URLs keeps the second), or else, unless it is a port, to the last
 * `@` of the line. */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^/:@\s"'?#]*):((?:(?![a-z][a-z0-9+.-]*:\/\/)[^\n])*@|(?!\d{1,5}(?:[^\w@]|$))[^\n]*@)/gim;
/** The end of an unquoted value: a space, or the end of a line in JSON (`"` or `",` before it). */
const VALUE_END = String.raw`(?=\s|"?,?$)`;
/** `?password=secret&...`: a URL's query parameter ends at `&`, `#` or a space. */
const QUERY_PASSWORD = new RegExp(String.raw`([?&](?:ssl)?password=)((?:\\.|[^\s&#\\])+?)(?=[\s&#]|"?,?$)`, 'gim');
/** `password=secret`, `password = 'it\'s'`, `password="..."`, `password=with\ space,comma`; in
 * JSON text a double-quoted value is `\"...\"`, masked to the last `\"` of the line. */
const KEYWORD_PASSWORD = new RegExp(
  String.raw`(?<![?&])(\b(?:pg|ssl)?password\s*=\s*)(` +
    [
      String.raw`\\"[^\n]*\\"`,
      String.raw`\\"[^\n]*`,
      String.raw`'(?:\\[^\n]|[^'\\\n])*'?`,
      String.raw`"(?:\\[^\n]|[^"\\\n])*"?`,
      String.raw`(?:\\[^\n]|[^\s\\])+?${VALUE_END}`,
    ].join('|') +
    ')',
  'gim',
);

/** A keyword value as libpq reads it: quotes removed, backslash escapes undone. */
function unquote(value: string): string {
  const quoted = /^(['"])(.*?)\1?$/s.exec(value);
  return (quoted ? quoted[2]! : value).replace(/\\(.)/gs, '$1');
}

/** Every password written in a connection string, in whichever form it was typed. */
export function passwordsIn(connectionString: string): string[] {
  const found: string[] = [];
  for (const m of connectionString.matchAll(URL_PASSWORD)) {
    const password = m[2]!.slice(0, -1);
    found.push(password, safeDecode(password));
  }
  for (const m of connectionString.matchAll(QUERY_PASSWORD)) found.push(m[2]!, safeDecode(m[2]!.replace(/\+/g, ' ')));
  for (const m of connectionString.matchAll(KEYWORD_PASSWORD)) found.push(m[2]!, unquote(m[2]!));
  return found.filter((p) => p !== '');
}

/** Registers every password of a connection string, in every form it might be printed in. */
export function registerConnectionString(connectionString: string): void {
  for (const password of passwordsIn(connectionString)) registerSecret(password);
}

/** Masks the passwords written in the forms above, known or not (no registered secrets). */
export function maskPasswordForms(text: string): string {
  return text.replace(URL_PASSWORD, `$1:${MASK}@`).replace(QUERY_PASSWORD, `$1${MASK}`).replace(KEYWORD_PASSWORD, `$1${MASK}`);
}

export function redact(text: string): string {
  longestFirst ??= [...secrets].sort((a, b) => b.length - a.length);
  let out = text;
  for (const secret of longestFirst) out = out.replaceAll(secret, MASK);
  return maskPasswordForms(out);
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
