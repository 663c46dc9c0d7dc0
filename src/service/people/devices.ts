// Devices that have logged in as a user before (OWASP's "device cookies"): on every successful
// login the browser or client gets a token naming the user and a random device id, signed with
// HMAC-SHA256. The key is the user's stored password hash: secret, the same on every replica and
// after a restart, and a new password makes every earlier device new again.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** `<userId>.<deviceId>.<signature>`, base64url parts. */
const TOKEN = /^([0-9a-f-]{36})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

function signature(userId: string, deviceId: string, passwordHash: string): Buffer {
  return createHmac('sha256', passwordHash).update(`tuner device ${userId} ${deviceId}`).digest();
}

/** A new device token for a user who has just logged in. */
export function issueDeviceToken(userId: string, passwordHash: string): string {
  const deviceId = randomBytes(16).toString('base64url');
  return `${userId}.${deviceId}.${signature(userId, deviceId, passwordHash).toString('base64url')}`;
}

/** The device id of a token this user was given, or null (absent, malformed, another user's,
 * forged, or from before a password change). */
export function deviceOf(token: string | undefined, userId: string, passwordHash: string): string | null {
  const match = token === undefined ? null : TOKEN.exec(token);
  if (!match || match[1] !== userId) return null;
  const deviceId = match[2]!;
  // Compared as the text the service issued: base64url's last character carries 2 unused bits, so
  // 4 spellings decode to the same bytes, and a token is one spelling only.
  const presented = Buffer.from(match[3]!);
  const expected = Buffer.from(signature(userId, deviceId, passwordHash).toString('base64url'));
  return presented.length === expected.length && timingSafeEqual(presented, expected) ? deviceId : null;
}
