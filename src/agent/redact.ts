// Secrets never reach a log line or an error message. Every secret the agent learns (from
// agent.yaml or the environment) is registered here, and everything the agent prints passes
// through `redact()`: known secret strings are masked, and so is the password part of any URL.
const secrets = new Set<string>();

export const MASK = '****';

/** Registers a secret value so that it is masked wherever it would be printed. */
export function registerSecret(value: string | undefined): void {
  // Very short values would mask ordinary words; real passwords and keys are longer.
  if (value && value.length >= 4) secrets.add(value);
  if (value) {
    // URL-encoded forms can appear inside connection strings.
    const encoded = encodeURIComponent(value);
    if (encoded !== value && encoded.length >= 4) secrets.add(encoded);
  }
}

const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^/:@\s]*):([^@\s]*)@/gi;

export function redact(text: string): string {
  let out = text.replace(URL_PASSWORD, `$1:${MASK}@`);
  // Longest first, so that a secret containing another is masked whole.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    out = out.replaceAll(secret, MASK);
  }
  return out;
}

/** A URL as it may be shown to a person: the password masked. */
export function showUrl(url: string): string {
  return redact(url);
}
