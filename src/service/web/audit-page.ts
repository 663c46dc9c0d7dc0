// The audit log as a page: an organization's (admins) or a database's (anyone of its
// organization), newest first, with the filters of the API and a link to the export.
import { AUDIT_ACTIONS, type AuditEvent } from '../audit/store.ts';
import type { AuditQuery } from '../audit/inputs.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import type { LoginSession } from '../people/store.ts';
import { formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { page } from './layout.ts';

/** "before → after" for a detail that changed, the value otherwise. */
function detailText(value: unknown): string {
  if (typeof value === 'object' && value !== null && 'before' in value && 'after' in value) {
    const v = value;
    return `${JSON.stringify(v.before)} → ${JSON.stringify(v.after)}`;
  }
  return JSON.stringify(value);
}

function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') search.set(k, String(v));
  const text = search.toString();
  return text ? `?${text}` : '';
}

export function auditPage(input: {
  login: LoginSession;
  database: DatabaseSummary | null;
  events: readonly AuditEvent[];
  asked: AuditQuery;
  next: number | null;
}): Html {
  const { login, database, events, asked, next } = input;
  const base = database ? `/databases/${database.id}/audit` : '/audit';
  const filters = { actor: asked.actor, action: asked.action };
  const exportUrl = `/api/manage/audit/export${query({ ...filters, databaseId: database?.id })}`;
  return page({
    title: database ? `Audit · ${database.name}` : 'Audit log',
    login,
    nav: database ? 'databases' : 'audit',
    body: html`<h1>${database ? html`Audit log of <a href="/databases/${database.id}">${database.name}</a>` : 'Audit log'}</h1>
<p class="sub">Every change, who made it (and how they logged in), from where, newest first. Entries are never changed; they are deleted after the configured retention.</p>
<form class="row card" method="get" action="${base}" id="audit-filter">
  <label>Actor<input type="text" name="actor" value="${asked.actor ?? ''}" maxlength="100"></label>
  <label>Action<select name="action"><option value="">any</option>${AUDIT_ACTIONS.map(
    (a) => html`<option value="${a}"${asked.action === a ? html` selected` : ''}>${a}</option>`,
  )}</select></label>
  <button type="submit" class="secondary">Filter</button>
  <a href="${exportUrl}" id="audit-export">Export as JSON lines</a>
</form>
<div class="card"><table id="audit-events"><thead><tr><th>Time</th><th>Actor</th><th>From</th><th>Action</th>${database ? '' : html`<th>Database</th>`}<th>Details</th></tr></thead><tbody>
${events.map(
  (
    e,
  ) => html`<tr data-action="${e.action}"><td>${formatTime(e.at)}</td><td>${e.actor.name} <span class="muted">${e.actor.kind === 'token' ? 'token' : (e.actor.via ?? '')}</span></td>
<td>${e.address ?? ''}</td><td>${e.action}</td>${database ? '' : html`<td>${e.databaseId ? html`<a href="/databases/${e.databaseId}">${e.databaseId.slice(0, 8)}</a>` : ''}</td>`}
<td>${Object.entries(e.details).map(([k, v]) => html`<span class="kv">${k}: ${detailText(v)}</span> `)}</td></tr>`,
)}
</tbody></table>
${events.length === 0 ? html`<p class="muted">Nothing recorded${asked.actor || asked.action ? ' that matches' : ''}.</p>` : ''}
${next ? html`<p><a href="${base}${query({ ...filters, before: next })}" id="audit-older">Older entries</a></p>` : ''}</div>`,
  });
}
