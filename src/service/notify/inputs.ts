// What an admin may send about the organization's webhooks, for the JSON API and the HTML forms
// alike: the same URL and secret rules as the service-wide webhook's (TUNER_WEBHOOK_URL).
import { z } from 'zod';
import { WEBHOOK_EVENT_KINDS, WebhookSecretSchema, WebhookUrlSchema } from './webhook.ts';

/** The kinds an organization's webhook may choose: what the watch raises (not the test kind). */
export const WATCH_EVENT_KINDS = WEBHOOK_EVENT_KINDS.filter((k) => k !== 'test');

export const NewWebhookInputSchema = z.strictObject({
  url: WebhookUrlSchema.pipe(z.string().max(2000, 'expected a URL of at most 2000 characters')),
  secret: WebhookSecretSchema,
  /** The kinds it receives; absent: all. */
  events: z
    .array(z.enum(WATCH_EVENT_KINDS, { error: `expected one of ${WATCH_EVENT_KINDS.join(', ')}` }))
    .min(1, 'expected at least one kind of event (or no events field: all of them)')
    .optional(),
});
export type NewWebhookInput = z.infer<typeof NewWebhookInputSchema>;
