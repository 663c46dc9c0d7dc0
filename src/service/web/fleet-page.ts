// The fleet home page: every database at a glance, what needs a person first. Sorting and
// filtering are GET parameters (a form and links), so they work without a script, survive a
// reload, and can be bookmarked or sent to a colleague; the Content-Security-Policy allows no
// inline script anyway.
import type { FleetAnswer } from '../fleet/fleet.ts';
import { FLEET_FLAGS, type FleetFlag } from '../fleet/flags.ts';
import { fleetFlags, verifiedGain } from '../fleet/attention.ts';
import { FLEET_SORTS, type FleetQuery } from '../fleet/query.ts';
import type { FleetEntry } from '../fleet/store.ts';
import type { LoginSession } from '../people/store.ts';
import { formatRelative, formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { page } from './layout.ts';

/** How each state reads, and its badge's colour. */
export const FLAG_LABELS: Record<FleetFlag, { text: string; badge: 'ok' | 'warn' | 'bad' | 'off' }> = {
  awaiting_approval: { text: 'awaiting approval', badge: 'warn' },
  agent_lost: { text: 'agent not reporting', badge: 'bad' },
  gain_gone: { text: 'gain gone', badge: 'bad' },
  blocked: { text: 'changes blocked', badge: 'bad' },
  session_failed: { text: 'session failed', badge: 'bad' },
  workload_changed: { text: 'workload changed', badge: 'warn' },
  advice: { text: 'advice pending', badge: 'warn' },
  agent_stopped: { text: 'agent stopped', badge: 'off' },
  no_agent: { text: 'no agent yet', badge: 'off' },
  tuning: { text: 'tuning', badge: 'ok' },
  kept: { text: 'kept', badge: 'ok' },
  idle: { text: 'idle', badge: 'off' },
};

const SORT_LABELS: Record<FleetQuery['sort'], string> = {
  attention: 'Needs attention first',
  name: 'Name',
  last_report: 'Silent longest first',
  gain: 'Largest verified gain first',
};

/** The fleet page's address for this query; defaults left out, so the plain page is `/`. */
export function fleetHref(query: FleetQuery, base = '/'): string {
  const params = new URLSearchParams();
  if (query.state !== 'all') params.set('state', query.state);
  if (query.q !== '') params.set('q', query.q);
  if (query.sort !== 'attention') params.set('sort', query.sort);
  if (query.page !== 1) params.set('page', String(query.page));
  const text = params.toString();
  return text === '' ? base : `${base}?${text}`;
}

const percent = (x: number) => `${Math.round(x * 1000) / 10} %`;

function gainCell(entry: FleetEntry): Html {
  const kept = entry.kept;
  if (!kept) return html`<span class="muted">–</span>`;
  const gain = verifiedGain(entry);
  const runtime = kept.runtime;
  const detail = html`<div class="muted">${Object.entries(kept.config)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ')}</div>`;
  if (gain === null || !runtime) return html`kept <span class="muted">(no verified figure)</span>${detail}`;
  return html`<span title="runtime ratio ${runtime.estimate} (${runtime.low} to ${runtime.high}) at ${kept.confidencePercent} %"
    >${percent(gain)} less runtime</span> <span class="muted">(${percent(1 - runtime.high)} to ${percent(1 - runtime.low)})</span>${detail}`;
}

function agentCell(entry: FleetEntry, now: Date): Html {
  const agent = entry.agent;
  if (!agent) return html`<span class="badge off">no agent yet</span>`;
  const badge =
    agent.health === 'connected'
      ? html`<span class="badge ok">connected</span>`
      : agent.health === 'stopped'
        ? html`<span class="badge off">stopped</span>`
        : html`<span class="badge bad">not reporting</span>`;
  return html`${badge}<div class="muted" title="${formatTime(agent.lastReportAt)}">last report ${formatRelative(agent.lastReportAt, now)}</div>`;
}

function sessionCell(entry: FleetEntry, now: Date): Html {
  const s = entry.latestSession;
  if (!s) return html`<span class="muted">–</span>`;
  const label = s.state.replace('_', ' ');
  const cls = s.state === 'awaiting_approval' ? 'warn' : s.state === 'failed' ? 'bad' : s.endedAt ? 'off' : 'ok';
  return html`<a href="/databases/${entry.id}"><span class="badge ${cls}" title="${s.message ?? ''}">${label}</span></a>
    <div class="muted">${s.endedAt ? `ended ${formatRelative(s.endedAt, now)}` : `since ${formatRelative(s.createdAt, now)}`}</div>`;
}

/** What the diagnoses argue for between sessions, linked to the dashboard's advice card. */
function adviceCell(entry: FleetEntry, now: Date): Html {
  const advice = entry.advice;
  if (!advice) return html`<span class="muted">–</span>`;
  return html`<a href="/databases/${entry.id}#advice"><span class="badge warn" title="${advice.findings.join(', ')}">advice pending</span></a>
    <div class="muted">${advice.parameters.join(', ')}; since ${formatRelative(advice.since, now)}</div>`;
}

function row(entry: FleetEntry, now: Date): Html {
  const flags = fleetFlags(entry);
  const blocked = entry.agent?.applyBlockedReason;
  return html`<tr data-database="${entry.id}" data-states="${flags.join(' ')}">
  <td><a href="/databases/${entry.id}">${entry.name}</a><div class="muted">${entry.target}</div></td>
  <td>${flags.map((f) => html`<span class="badge ${FLAG_LABELS[f].badge}">${FLAG_LABELS[f].text}</span> `)}
    ${blocked ? html`<div class="muted">${blocked}</div>` : ''}</td>
  <td>${agentCell(entry, now)}</td>
  <td>${sessionCell(entry, now)}</td>
  <td class="advice">${adviceCell(entry, now)}</td>
  <td>${gainCell(entry)}</td>
</tr>`;
}

/** A column heading that sorts by `sort`, keeping the filter. */
function sortHeading(query: FleetQuery, sort: FleetQuery['sort'], text: string): Html {
  const on = query.sort === sort;
  return html`<th><a href="${fleetHref({ ...query, sort, page: 1 })}" class="${on ? 'on' : ''}" aria-sort="${on ? 'ascending' : 'none'}">${text}${on ? ' ▾' : ''}</a></th>`;
}

/** Which of the filter's databases the page shows, and links to the pages before and after. */
function pager(answer: FleetAnswer, query: FleetQuery): Html {
  const pages = Math.max(1, Math.ceil(answer.matched / answer.pageSize));
  if (pages === 1) return html``;
  const first = (query.page - 1) * answer.pageSize + 1;
  const link = (page: number, text: string, rel: string) =>
    page >= 1 && page <= pages
      ? html`<a href="${fleetHref({ ...query, page })}" rel="${rel}">${text}</a>`
      : html`<span class="muted">${text}</span>`;
  return html`<p class="pager" id="fleet-pager">${link(query.page - 1, '← previous', 'prev')}
  <span>${first}–${first + answer.shown.length - 1} of ${answer.matched} (page ${query.page} of ${pages})</span>
  ${link(query.page + 1, 'next →', 'next')}</p>`;
}

export function fleetPage(login: LoginSession, answer: FleetAnswer, query: FleetQuery, now = new Date()): Html {
  const { counts, attention, total } = answer;
  const chip = (state: FleetQuery['state'], text: string, n: number) =>
    html`<a class="badge ${query.state === state ? 'ok' : 'off'}" href="${fleetHref({ ...query, state, page: 1 })}">${text} ${n}</a> `;
  const chips = [
    chip('all', 'all', total),
    chip('attention', 'needs attention', attention),
    ...FLEET_FLAGS.filter((f) => counts[f] > 0).map((f) => chip(f, FLAG_LABELS[f].text, counts[f])),
  ];
  const stateOptions = (['all', 'attention', ...FLEET_FLAGS] as const).map(
    (s) =>
      html`<option value="${s}" ${query.state === s ? 'selected' : ''}>${s === 'all' ? 'all' : s === 'attention' ? 'needs attention' : FLAG_LABELS[s].text}</option>`,
  );
  const sortOptions = FLEET_SORTS.map((s) => html`<option value="${s}" ${query.sort === s ? 'selected' : ''}>${SORT_LABELS[s]}</option>`);
  const table =
    answer.shown.length === 0
      ? html`<p class="empty">${total === 0 ? html`No database yet: <a href="/databases">add the first one</a>.` : answer.matched > 0 ? html`No database on this page. <a href="${fleetHref({ ...query, page: 1 })}">First page</a>` : html`No database matches this filter. <a href="/">Show all</a>`}</p>`
      : html`<table id="fleet"><thead><tr>
  ${sortHeading(query, 'name', 'Database')}${sortHeading(query, 'attention', 'State')}${sortHeading(query, 'last_report', 'Agent')}
  <th>Session</th><th>Advice</th>${sortHeading(query, 'gain', 'Kept configuration')}
</tr></thead><tbody>${answer.shown.map((e) => row(e, now))}</tbody></table>${pager(answer, query)}`;
  return page({
    title: 'Fleet',
    login,
    nav: 'fleet',
    body: html`<h1>Fleet</h1>
<p class="sub">${total} databases; ${attention} need a person. Sorted: ${SORT_LABELS[query.sort].toLowerCase()}.</p>
<div class="card">
  <p>${chips}</p>
  <form class="stack" method="get" action="/" id="fleet-filter">
    <div class="row">
      <label>Name contains<input type="text" name="q" maxlength="100" value="${query.q}"></label>
      <label>State<select name="state">${stateOptions}</select></label>
      <label>Sort<select name="sort">${sortOptions}</select></label>
      <div><button type="submit">Show</button></div>
    </div>
  </form>
</div>
<div class="card">${table}</div>
<p><a href="/databases" id="fleet-add">Add a database</a> <span class="muted">(the list of databases, with their agent setup)</span></p>`,
  });
}
