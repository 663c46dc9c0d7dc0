// The agent setup page: the spec's setup steps per target (the database, the cloud's
// permissions: setup/steps.ts), agent.yaml, the installer, binary and container
// commands (and Cloud A's ECS task), and the database's API keys. A new key appears in full
// only on the page that created it.
import { setupSnippets, targetLabel } from '../setup/snippets.ts';
import type { ApiKeyInfo, DatabaseSummary } from '../databases/store.ts';
import type { LoginSession } from '../people/store.ts';
import { formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { csrfField, page } from './layout.ts';

export interface SetupPageInput {
  login: LoginSession;
  database: DatabaseSummary;
  keys: readonly ApiKeyInfo[];
  /** The key just created, shown once. */
  newKey: string | null;
  serverUrl: string;
  /** Said beside the address when it is the listen address (no --public-url): http/public-url.ts. */
  serverUrlNote?: string | undefined;
  agentImage: string;
  installScriptUrl: string;
  /** The targets (e.g. linux-x64) of the tuner-agent binaries this service serves; empty when none. */
  binaryTargets: readonly string[];
  error?: string | undefined;
}

/** True when agents would send their API key in clear text across a network: plain HTTP to an
 * address that is not this host's loopback. */
export function keysTravelInClear(serverUrl: string): boolean {
  const url = new URL(serverUrl);
  if (url.protocol !== 'http:') return false;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return !(host === 'localhost' || host === '::1' || /^127\./.test(host));
}

function snippet(id: string, title: string, text: string, note?: Html): Html {
  return html`<div class="snippet"><h3>${title}</h3>${note ?? ''}<pre id="${id}">${text}</pre>
<button type="button" class="secondary small copy" data-copy="${id}">Copy</button></div>`;
}

export function setupPage(input: SetupPageInput): Html {
  const { login, database, keys, newKey } = input;
  const s = setupSnippets({
    target: database.target,
    databaseId: database.id,
    apiKey: newKey,
    serverUrl: input.serverUrl,
    agentImage: input.agentImage,
    installScriptUrl: input.installScriptUrl,
  });
  const binaries =
    input.binaryTargets.length > 0
      ? snippet(
          'binary-command',
          'Install and run the binary',
          s.binaryCommands,
          html`<p class="muted">The installer puts <code>tuner-agent</code> in the current directory and checks its SHA-256. Binaries here: <span id="binary-targets">${input.binaryTargets.join(', ')}</span>.</p>`,
        )
      : html`<div class="notice warn" id="no-binaries" role="status"><strong>This tuning service has no tuner-agent binaries to install</strong>: its administrator builds them with <code>npm run build:agent</code> (docs/install.md). Until then, run the container below, or the agent from the npm package.</div>`;
  const ecs = s.ecsTaskDefinition
    ? snippet(
        'ecs-task-definition',
        'Or on Cloud A container orchestration: an ECS task definition',
        s.ecsTaskDefinition,
        html`<p class="muted">The task role (with the policy that <code>tuner-agent permissions --${database.target}</code> prints) takes the place of access keys; the EFS volume keeps the journal and lease when a task is replaced.</p>`,
      )
    : '';
  const keyRows = keys.map(
    (k) => html`<tr>
  <td class="mono">${k.displayPrefix}…</td><td>${k.label || html`<span class="muted">–</span>`}</td>
  <td>${formatTime(k.createdAt)}</td>
  <td>${k.revokedAt ? html`<span class="badge off">revoked ${formatTime(k.revokedAt)}</span>` : html`<span class="badge ok">live</span>`}</td>
  <td>${
    k.revokedAt
      ? ''
      : html`<form class="inline" method="post" action="/databases/${database.id}/keys/${k.id}/revoke" data-confirm="Revoke this key? Agents using it are refused from then on.">${csrfField(login)}<button class="danger small" type="submit">Revoke</button></form>`
  }</td>
</tr>`,
  );
  return page({
    title: `Agent setup: ${database.name}`,
    login,
    nav: 'databases',
    body: html`<h1>Agent setup: ${database.name}</h1>
<p class="sub">${targetLabel(database.target)} · database id <code id="database-id">${database.id}</code> · <a href="/databases/${database.id}">Dashboard</a></p>
${input.error ? html`<div class="notice bad" role="alert">${input.error}</div>` : ''}
${input.serverUrlNote ? html`<div class="notice warn" id="server-url-note" role="status"><code>${input.serverUrl}</code>: ${input.serverUrlNote}.</div>` : ''}
${
  keysTravelInClear(input.serverUrl)
    ? html`<div class="notice bad" id="plain-http-warning" role="alert"><strong>Agents would send their API key over plain HTTP</strong> to <code>${input.serverUrl}</code>, readable by anyone on the network path. Serve this service over HTTPS (<code>--tls-cert</code> and <code>--tls-key</code>, or a reverse proxy with <code>--public-url https://…</code>) before you install agents on other hosts.</div>`
    : ''
}
${
  newKey
    ? html`<div class="notice ok" role="status"><strong>Your new API key</strong> (shown only now: copy it into agent.yaml, it is stored only as a hash):<br>
<span class="secret" id="api-key">${newKey}</span> <button type="button" class="secondary small" data-copy="api-key">Copy</button><br>
<span class="muted">The agent.yaml and the container command below already hold it.</span></div>`
    : html`<div class="notice warn">API keys are shown once, when they are created; below they read <code>&lt;API_KEY&gt;</code>. Lost one? Create a new key and revoke the old.</div>`
}
<div class="card">
<ol class="steps">
  ${s.steps.map((step) => html`<li>${snippet(step.id, step.title, step.text, html`<p class="muted">${step.note}</p>`)}</li>`)}
  <li>${snippet('agent-yaml', 'agent.yaml, next to the tuner-agent binary', s.agentYaml, html`<p class="muted">Replace each &lt;PLACEHOLDER&gt; with your values.</p>`)}</li>
  <li>${binaries}
      ${snippet('container-command', 'Or run the container (configured by environment variables)', s.containerCommand)}
      ${ecs}</li>
</ol>
</div>
<div class="card">
  <h2>API keys</h2>
  ${keys.length === 0 ? html`<p class="empty">No key.</p>` : html`<table><thead><tr><th>Key</th><th>Label</th><th>Created</th><th>Status</th><th></th></tr></thead><tbody>${keyRows}</tbody></table>`}
  <form class="stack" method="post" action="/databases/${database.id}/keys">
    ${csrfField(login)}
    <div class="row"><label>Label of a new key<span class="hint">Optional, e.g. the host it goes to.</span><input type="text" name="label" maxlength="100"></label>
    <div><button type="submit" class="secondary">Create API key</button></div></div>
  </form>
</div>`,
  });
}
