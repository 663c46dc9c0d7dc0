// The webhook's signature, in the style of the well-known schemes (Stripe's, Standard Webhooks):
// an HMAC-SHA256, keyed with the shared secret, over the timestamp and the raw body, so that a
// receiver can tell the request came from this service, was not altered, and is not an old one
// replayed. docs/notifications.md gives the receiver's procedure; verifyWebhookSignature is it.
//
//   Tuner-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'tuner-signature';
export const EVENT_ID_HEADER = 'tuner-event-id';
/** A receiver refuses a timestamp further than this from its clock (replays, very late retries). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

function hmac(secret: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex');
}

/** The header's value for this body, sent at `timestamp` (unix seconds). */
export function signWebhook(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${hmac(secret, timestamp, body)}`;
}

export type SignatureCheck = { ok: true; timestamp: number } | { ok: false; reason: string };

/**
 * The receiver's check: the header parses, its timestamp is within `toleranceSeconds` of `now`,
 * and one of its v1 signatures is the HMAC of `t.body` under the secret (compared in constant
 * time). `body` is the request's body exactly as received, before any JSON parsing.
 */
export function verifyWebhookSignature(input: {
  secret: string;
  header: string | null | undefined;
  body: string;
  now?: Date;
  toleranceSeconds?: number;
}): SignatureCheck {
  if (!input.header) return { ok: false, reason: 'no signature header' };
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of input.header.split(',')) {
    const [key, value = ''] = part.trim().split('=', 2);
    if (key === 't' && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (key === 'v1' && /^[0-9a-f]{64}$/.test(value)) signatures.push(value);
  }
  if (timestamp === null || signatures.length === 0) return { ok: false, reason: 'the signature header has no t= or no v1=' };
  const now = Math.floor((input.now ?? new Date()).getTime() / 1000);
  if (Math.abs(now - timestamp) > (input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS))
    return { ok: false, reason: 'the timestamp is too far from now' };
  const expected = Buffer.from(hmac(input.secret, timestamp, input.body), 'hex');
  const matches = signatures.some((s) => timingSafeEqual(Buffer.from(s, 'hex'), expected));
  return matches ? { ok: true, timestamp } : { ok: false, reason: 'no signature matches' };
}
