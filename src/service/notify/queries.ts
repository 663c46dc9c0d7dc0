// What admins read of their organization's webhooks: never their secrets (the store does not
// return them).
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import type { Actor } from '../people/store.ts';
import { MANAGE_WEBHOOKS, type WebhookDeps } from './actions.ts';
import type { Webhook } from './store.ts';

export async function listWebhooks(deps: WebhookDeps & AuthorizeDeps, actor: Actor | null): Promise<Webhook[]> {
  const { user } = await authorize(deps, actor, { role: 'admin', to: MANAGE_WEBHOOKS });
  return deps.stores.webhooks.listWebhooks(user.organizationId);
}
