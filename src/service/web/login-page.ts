import { html, type Html } from './html.ts';
import { page } from './layout.ts';

export function loginPage(options: { error?: string; username?: string; loginCsrf: string }): Html {
  return page({
    title: 'Log in',
    login: null,
    body: html`<div class="login card">
  <h1>Log in</h1>
  <p class="sub">The tuning service of tuner.</p>
  ${options.error ? html`<div class="notice bad" role="alert">${options.error}</div>` : ''}
  <form class="stack" method="post" action="/login">
    <input type="hidden" name="_csrf" value="${options.loginCsrf}">
    <label>Username<input type="text" name="username" autocomplete="username" value="${options.username ?? ''}" required autofocus></label>
    <label>Password<input type="password" name="password" autocomplete="current-password" required></label>
    <button type="submit">Log in</button>
  </form>
</div>`,
  });
}
