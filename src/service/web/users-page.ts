// The admin's page: the people of the organization with their roles, a form for a new one, and
// forms that change a role or remove a person; then the organization's webhooks (webhooks-section.ts).
import { USERNAME_HTML_PATTERN, USERNAME_MAX_LENGTH } from '../people/inputs.ts';
import { ROLES, type LoginSession, type Role, type User } from '../people/store.ts';
import { formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { csrfField, page } from './layout.ts';
import { webhooksSection } from './webhooks-section.ts';
import type { webhookView } from '../notify/views.ts';

/** What each role may do, as the page says it (authorize.ts decides). */
export const ROLE_SUMMARY: Record<Role, string> = {
  viewer: 'reads everything of the organization',
  operator: 'also starts, stops and approves tuning sessions, keeps or reverts configurations, applies advice',
  admin: 'also manages databases, API keys, people and their roles, API tokens, webhooks and the audit log',
};

const roleOptions = (selected: Role) => ROLES.map((r) => html`<option value="${r}"${r === selected ? html` selected` : ''}>${r}</option>`);

export function usersPage(
  login: LoginSession,
  users: readonly User[],
  webhooks: ReadonlyArray<ReturnType<typeof webhookView>>,
  result?: { created?: { username: string; password: string | null }; error?: string; done?: string },
): Html {
  return page({
    title: 'People',
    login,
    nav: 'users',
    body: html`<h1>People</h1>
<p class="sub">Everyone here sees the organization's databases; their role says what else they may do.</p>
${result?.error ? html`<div class="notice bad" role="alert">${result.error}</div>` : ''}
${result?.done ? html`<div class="notice ok" role="status">${result.done}</div>` : ''}
${
  result?.created
    ? html`<div class="notice ok" role="status">User <strong>${result.created.username}</strong> created.${
        result.created.password
          ? html` Their password, shown only now: <span class="secret" id="new-password">${result.created.password}</span>`
          : ''
      }</div>`
    : ''
}
<div class="card"><table><thead><tr><th>Username</th><th>Role</th><th>Created</th><th></th></tr></thead><tbody>
${users.map(
  (u) => html`<tr><td>${u.username}</td><td><form class="inline" method="post" action="/users/${u.id}/role">${csrfField(login)}
<select name="role" aria-label="Role of ${u.username}">${roleOptions(u.role)}</select> <button type="submit" class="secondary">Change</button></form></td>
<td>${formatTime(u.createdAt)}</td>
<td><form class="inline" method="post" action="/users/${u.id}/remove">${csrfField(login)}<button type="submit" class="link">Remove</button></form></td></tr>`,
)}
</tbody></table>
<ul class="muted">${ROLES.map((r) => html`<li><strong>${r}</strong>: ${ROLE_SUMMARY[r]}</li>`)}</ul></div>
<div class="card"><h2>Add a person</h2>
<form class="stack" method="post" action="/users">
  ${csrfField(login)}
  <div class="row">
    <label>Username<input type="text" name="username" maxlength="${USERNAME_MAX_LENGTH}" pattern="${USERNAME_HTML_PATTERN}" required></label>
    <label>Password<span class="hint">At least 12 characters; leave empty to generate one.</span><input type="password" name="password" autocomplete="new-password"></label>
    <label>Role<select name="role">${roleOptions('viewer')}</select></label>
  </div>
  <button type="submit">Add</button>
</form></div>
${webhooksSection(login, webhooks)}`,
  });
}
