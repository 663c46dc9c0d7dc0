// The admin's page: the users, and a form for a new one (each user gets an account of their own).
import { USERNAME_HTML_PATTERN, USERNAME_MAX_LENGTH } from '../people/inputs.ts';
import type { LoginSession, User } from '../people/store.ts';
import { formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { csrfField, page } from './layout.ts';

export function usersPage(
  login: LoginSession,
  users: readonly User[],
  result?: { created?: { username: string; password: string | null }; error?: string },
): Html {
  return page({
    title: 'Users',
    login,
    nav: 'users',
    body: html`<h1>Users</h1>
<p class="sub">Each user has an account of their own: they see only the databases they created.</p>
${result?.error ? html`<div class="notice bad" role="alert">${result.error}</div>` : ''}
${
  result?.created
    ? html`<div class="notice ok" role="status">User <strong>${result.created.username}</strong> created.${
        result.created.password
          ? html` Their password, shown only now: <span class="secret" id="new-password">${result.created.password}</span>`
          : ''
      }</div>`
    : ''
}
<div class="card"><table><thead><tr><th>Username</th><th>Role</th><th>Created</th></tr></thead><tbody>
${users.map((u) => html`<tr><td>${u.username}</td><td>${u.isAdmin ? 'admin' : 'user'}</td><td>${formatTime(u.createdAt)}</td></tr>`)}
</tbody></table></div>
<div class="card"><h2>Create a user</h2>
<form class="stack" method="post" action="/users">
  ${csrfField(login)}
  <div class="row">
    <label>Username<input type="text" name="username" maxlength="${USERNAME_MAX_LENGTH}" pattern="${USERNAME_HTML_PATTERN}" required></label>
    <label>Password<span class="hint">At least 12 characters; leave empty to generate one.</span><input type="password" name="password" autocomplete="new-password"></label>
  </div>
  <label class="check"><input type="checkbox" name="isAdmin" value="true"> Admin (can create users)</label>
  <button type="submit">Create user</button>
</form></div>`,
  });
}
