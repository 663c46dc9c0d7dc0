import { html, type Html } from './html.ts';
import { page } from './layout.ts';

/** Single sign-on on the login page: the provider's name, and why it is unavailable if it is. */
export interface SsoButton {
  name: string;
  unavailable: string | null;
}

export function loginPage(options: {
  error?: string;
  username?: string;
  loginCsrf: string;
  sso?: SsoButton | undefined;
  /** False when password login is off (only the break-glass admin may still use the form). */
  passwordLogin?: boolean;
}): Html {
  const { sso, passwordLogin = true } = options;
  return page({
    title: 'Log in',
    login: null,
    body: html`<div class="login card">
  <h1>Log in</h1>
  <p class="sub">The tuning service of tuner.</p>
  ${options.error ? html`<div class="notice bad" role="alert">${options.error}</div>` : ''}
  ${
    sso
      ? html`<p><a class="button" id="sso-login" href="/login/sso">Log in with ${sso.name}</a></p>
  ${sso.unavailable ? html`<p class="notice warn" id="sso-unavailable">Log in with ${sso.name} is unavailable right now (${sso.unavailable}). It is tried again when you click it.</p>` : ''}`
      : ''
  }
  ${sso && !passwordLogin ? html`<p class="sub">Password login is off; only the break-glass admin may use it.</p>` : ''}
  <form class="stack" method="post" action="/login">
    <input type="hidden" name="_csrf" value="${options.loginCsrf}">
    <label>Username<input type="text" name="username" autocomplete="username" value="${options.username ?? ''}" required ${sso ? '' : 'autofocus'}></label>
    <label>Password<input type="password" name="password" autocomplete="current-password" required></label>
    <button type="submit">Log in${sso ? ' with a password' : ''}</button>
  </form>
</div>`,
  });
}

/** A single sign-on that was refused: why, and the way back. No account was created. */
export function ssoRefusedPage(status: number, message: string): Html {
  return page({
    title: 'Sign-in refused',
    login: null,
    body: html`<div class="login card" id="sso-refused">
  <h1>Sign-in refused</h1>
  <div class="notice bad" role="alert">${message}</div>
  <p><a href="/login">Back to log in</a></p>
  <p class="sub">Error ${String(status)}</p>
</div>`,
  });
}
