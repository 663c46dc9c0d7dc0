// The frame of every page: head, top bar with navigation and the log-out form.
import type { LoginSession } from '../people/store.ts';
import { html, type Html } from './html.ts';

export interface PageFrame {
  title: string;
  login: LoginSession | null;
  /** Which navigation entry is current. */
  nav?: 'databases' | 'fleet' | 'users' | 'audit';
  body: Html;
}

/** A hidden field with the login session's CSRF token: every form that changes something has one. */
export function csrfField(login: LoginSession): Html {
  return html`<input type="hidden" name="_csrf" value="${login.csrfToken}">`;
}

export function page(frame: PageFrame): Html {
  const { login } = frame;
  const top = login
    ? html`<nav>
        <a href="/" class="${frame.nav === 'fleet' ? 'on' : ''}">Fleet</a>
        <a href="/databases" class="${frame.nav === 'databases' ? 'on' : ''}">Databases</a>
        ${login.user.role === 'admin' ? html`<a href="/users" class="${frame.nav === 'users' ? 'on' : ''}">People</a><a href="/audit" class="${frame.nav === 'audit' ? 'on' : ''}">Audit</a>` : ''}
      </nav>
      <div class="who"><span>${login.user.username}</span>
        <form class="inline" method="post" action="/logout">${csrfField(login)}<button class="link" type="submit">Log out</button></form>
      </div>`
    : html`<nav></nav>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${frame.title} · tuner</title>
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/app.css">
<script src="/static/app.js" defer></script>
</head>
<body>
<header class="top"><a class="brand" href="/">tuner</a>${top}</header>
<main>
${frame.body}
</main>
</body>
</html>
`;
}

export function errorPage(login: LoginSession | null, status: number, message: string): Html {
  return page({
    title: status === 404 ? 'Not found' : 'Something went wrong',
    login,
    body: html`<div class="card"><h1>${status === 404 ? 'Not found' : `Error ${status}`}</h1><p>${message}</p><p><a href="/">Back to your databases</a></p></div>`,
  });
}
