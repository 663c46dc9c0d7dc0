// The home page: the organization's databases with their agents' status, and the form for a new one.
import { TARGETS } from '../../agent/targets/registry.ts';
import { targetLabel } from '../setup/snippets.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import type { LoginSession } from '../people/store.ts';
import { formatRelative, formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { csrfField, page } from './layout.ts';

export function agentBadge(db: DatabaseSummary): Html {
  if (!db.agent) return html`<span class="badge off">no agent yet</span>`;
  if (db.agent.live) return html`<span class="badge ok">connected</span>`;
  return html`<span class="badge warn">${db.agent.releasedAt ? 'stopped' : 'not reporting'}</span>`;
}

export function databasesPage(login: LoginSession, databases: readonly DatabaseSummary[], error?: string): Html {
  const rows = databases.map(
    (db) => html`<tr>
  <td><a href="/databases/${db.id}">${db.name}</a><div class="muted mono">${db.id}</div></td>
  <td>${db.target}</td>
  <td>${agentBadge(db)}</td>
  <td>${db.agent ? html`${db.agent.hostname} <span class="muted">(pid ${db.agent.pid})</span>` : html`<span class="muted">–</span>`}</td>
  <td title="${formatTime(db.agent?.lastReportAt)}">${formatRelative(db.agent?.lastReportAt)}</td>
  <td><a href="/databases/${db.id}/setup">Agent setup</a></td>
</tr>`,
  );
  return page({
    title: 'Databases',
    login,
    nav: 'databases',
    body: html`<h1>Databases</h1>
<p class="sub">Each database is tuned by one agent that reports here with an API key of that database.</p>
${error ? html`<div class="notice bad" role="alert">${error}</div>` : ''}
<div class="card">
  ${
    databases.length === 0
      ? html`<p class="empty">No database yet: add the first one below.</p>`
      : html`<table><thead><tr><th>Name</th><th>Target</th><th>Agent</th><th>Host</th><th>Last report</th><th></th></tr></thead><tbody>${rows}</tbody></table>`
  }
</div>
<div class="card">
  <h2>Add a database</h2>
  <form class="stack" method="post" action="/databases">
    ${csrfField(login)}
    <div class="row">
      <label>Name<span class="hint">Yours to choose, e.g. "orders (production)".</span><input type="text" name="name" maxlength="100" required></label>
      <label>Target<span class="hint">Where the database runs; the agent's flag.</span>
        <select name="target">${TARGETS.kinds.map((t) => html`<option value="${t}">${targetLabel(t)} (--${t})</option>`)}</select>
      </label>
      <div><button type="submit">Create database and API key</button></div>
    </div>
  </form>
</div>`,
  });
}
