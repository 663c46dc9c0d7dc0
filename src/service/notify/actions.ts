// What admins do about their organization's webhooks, through the JSON API or the people page
// alike: add one (its URL and secret, and the kinds of events it takes) and remove one. Each is in
// the audit log with the receiver's scheme, host and path, never the secret nor the URL's query.
// A webhook's destination must be fit (destinations.ts): an admin is a tenant, who may not point
// the service at its own network.
import { randomUUID } from 'node:crypto';
import { recordAudit, type AuditDeps } from '../audit/record.ts';
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import { conflict, invalid, notFound } from '../errors.ts';
import type { Actor } from '../people/store.ts';
import type { WebhookDestinations } from './destinations.ts';
import type { NewWebhookInput } from './inputs.ts';
import type { Webhook, WebhookStore } from './store.ts';
import { receiverOf } from './webhook.ts';

export interface WebhookDeps extends AuditDeps {
  stores: { webhooks: WebhookStore } & AuditDeps['stores'];
  webhookDestinations: WebhookDestinations;
}

export const MANAGE_WEBHOOKS = 'manage webhooks';
/** Each event is sent once per webhook: a bound on what one event costs. */
export const MAX_WEBHOOKS_PER_ORGANIZATION = 10;

export async function createWebhook(deps: WebhookDeps & AuthorizeDeps, actor: Actor, input: NewWebhookInput): Promise<Webhook> {
  await authorize(deps, actor, { role: 'admin', to: MANAGE_WEBHOOKS });
  const existing = await deps.stores.webhooks.listWebhooks(actor.organizationId);
  if (existing.length >= MAX_WEBHOOKS_PER_ORGANIZATION)
    throw conflict(`an organization has at most ${MAX_WEBHOOKS_PER_ORGANIZATION} webhooks: remove one first`);
  const refused = await deps.webhookDestinations.whyRefused(input.url);
  if (refused !== null) throw invalid(`body.url: ${refused}`);
  const webhook = await deps.stores.webhooks.createWebhook({
    id: randomUUID(),
    organizationId: actor.organizationId,
    url: input.url,
    secret: input.secret,
    events: input.events ?? null,
    createdBy: actor.id,
  });
  await recordAudit(deps, actor, 'webhook.created', { webhookId: webhook.id, url: receiverOf(webhook.url), events: webhook.events });
  return webhook;
}

export async function removeWebhook(deps: WebhookDeps & AuthorizeDeps, actor: Actor, webhookId: string): Promise<Webhook> {
  await authorize(deps, actor, { role: 'admin', to: MANAGE_WEBHOOKS });
  const removed = await deps.stores.webhooks.deleteWebhook(actor.organizationId, webhookId);
  if (!removed) throw notFound(`no webhook ${webhookId} in your organization`);
  await recordAudit(deps, actor, 'webhook.removed', { webhookId, url: receiverOf(removed.url), events: removed.events });
  return removed;
}
