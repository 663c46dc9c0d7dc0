// The people page's webhooks section, for admins: the organization's webhooks (the receiver's
// scheme, host and path: never the secret nor the URL's query), a form that adds one and forms
// that remove one.
import { WATCH_EVENT_KINDS } from '../notify/inputs.ts';
import type { webhookView } from '../notify/views.ts';
import { formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { csrfField } from './layout.ts';
import type { LoginSession } from '../people/store.ts';

/** The form's checkbox of each kind of event. */
export const eventField = (kind: string) => `event-${kind}`;

export function webhooksSection(login: LoginSession, webhooks: ReadonlyArray<ReturnType<typeof webhookView>>): Html {
  return html`<div class="card" id="webhooks"><h2>Webhooks</h2>
<p class="muted">The watch's events about the organization's databases are posted to each, signed with its secret (docs/notifications.md).</p>
${
  webhooks.length === 0
    ? html`<p class="muted">No webhooks yet.</p>`
    : html`<table><thead><tr><th>Receiver</th><th>Events</th><th>Added</th><th></th></tr></thead><tbody>
${webhooks.map(
  (w) => html`<tr><td><code>${w.url}</code>${w.hasQuery ? html` <span class="muted">(and a query, not shown)</span>` : ''}</td>
<td>${w.events ? w.events.join(', ') : 'all'}</td><td>${formatTime(new Date(w.createdAt))}</td>
<td><form class="inline" method="post" action="/webhooks/${w.id}/remove">${csrfField(login)}<button type="submit" class="link">Remove</button></form></td></tr>`,
)}
</tbody></table>`
}
<h3>Add a webhook</h3>
<form class="stack" method="post" action="/webhooks">
  ${csrfField(login)}
  <div class="row">
    <label>URL<span class="hint">http:// or https://, without a user or password.</span><input type="url" name="url" maxlength="2000" required></label>
    <label>Secret<span class="hint">32 to 512 characters, shared with the receiver (openssl rand -hex 32); never shown again.</span><input type="password" name="secret" minlength="32" maxlength="512" autocomplete="off" required></label>
  </div>
  <div><span class="hint">The events it receives (all ticked: every kind, those added later too).</span>
  ${WATCH_EVENT_KINDS.map((k) => html`<label class="check"><input type="checkbox" name="${eventField(k)}" value="true" checked> ${k}</label>`)}</div>
  <button type="submit">Add webhook</button>
</form></div>`;
}
