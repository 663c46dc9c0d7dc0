// An organization's webhook as the people's API and the people page show it: the receiver's
// scheme, host and path (its query may hold a token of the receiver's: only whether there is one),
// never the secret.
import type { Webhook } from './store.ts';
import { receiverOf } from './webhook.ts';

export function webhookView(w: Webhook) {
  return {
    id: w.id,
    url: receiverOf(w.url),
    hasQuery: new URL(w.url).search !== '',
    events: w.events,
    createdAt: w.createdAt.toISOString(),
  };
}
