// Secrets the service hands out: API keys for agents, login session tokens and CSRF tokens for people.
// Only SHA-256 hashes of API keys and login session tokens are stored; they are 256 random bits, so a
// fast hash is enough (nothing to brute-force), unlike passwords.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Recognizable in a config file, a log or a secret scanner's rules. */
export const API_KEY_PREFIX = 'tuner_';
const API_KEY_PATTERN = /^tuner_[A-Za-z0-9_-]{43}$/;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export interface NewApiKey {
  /** The key itself: shown once, never stored. */
  key: string;
  hash: string;
  /** Enough of the key to tell keys apart on a page: the prefix and 6 more characters. */
  displayPrefix: string;
}

export function generateApiKey(): NewApiKey {
  const key = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { key, hash: sha256Hex(key), displayPrefix: key.slice(0, API_KEY_PREFIX.length + 6) };
}

export function looksLikeApiKey(text: string): boolean {
  return API_KEY_PATTERN.test(text);
}

/** Compares the presented key's hash with every live hash of the database, each in constant time. */
export function matchesAnyHash(presentedKey: string, liveHashes: readonly string[]): boolean {
  const presented = Buffer.from(sha256Hex(presentedKey), 'hex');
  let match = false;
  for (const hash of liveHashes) {
    const stored = Buffer.from(hash, 'hex');
    if (stored.length === presented.length && timingSafeEqual(stored, presented)) match = true;
  }
  return match;
}

export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
