// A database's dashboard: the agent's status, the latest metrics with their trend, the top
// statements, the catalog knobs' current settings, the commands with their outcomes, and forms
// to issue an apply or a revert and to set the report interval.
import { getKnob } from '../../knobs/catalog.ts';
import { REPORT_INTERVAL_SECONDS, type Command, type Setting, type SystemInfo } from '../../protocol/v1.ts';
import type { MetricsReport } from '../../protocol/report.ts';
import { statementsPerSecond, THROUGHPUT_FIGURE } from '../../measure/throughput.ts';
import type { CommandRecord, DatabaseSummary, ReportPoint, StoredEvent, StoredReport } from '../databases/store.ts';
import type { LoginSession } from '../people/store.ts';
import { commandState } from '../databases/views.ts';
import { sparkline } from './charts.ts';
import { agentBadge } from './databases-page.ts';
import { formatMs, formatNumber, formatPercent, formatRelative, formatTime } from './format.ts';
import { describeMachine, formatBytes } from '../../knobs/index.ts';
import { html, type Html } from './html.ts';
import { csrfField, page } from './layout.ts';
import { tuningSessionSection, type TuningSessionSectionInput } from './tuning-session-section.ts';
import type { AdviceAnswer } from '../advice/queries.ts';
import { adviceCard } from './advice-card.ts';

export interface DashboardInput {
  login: LoginSession;
  database: DatabaseSummary;
  defaultIntervalSeconds: number;
  report: StoredReport | null;
  series: readonly ReportPoint[];
  commands: readonly CommandRecord[];
  events: readonly StoredEvent[];
  notice?: { kind: 'ok' | 'bad'; text: string } | undefined;
  /** The tuning-session section; absent, the dashboard has none. */
  tuning?: Omit<TuningSessionSectionInput, 'login' | 'database'> | undefined;
  /** What the diagnoses argue for between sessions; absent, the dashboard shows none. */
  advice?: AdviceAnswer | undefined;
}

const TOP_STATEMENTS_SHOWN = 25;

function agentCard(input: DashboardInput): Html {
  const { database } = input;
  const agent = database.agent;
  const interval = database.reportIntervalSeconds ?? input.defaultIntervalSeconds;
  const body = agent
    ? html`<dl class="kv">
  <dt>Status</dt><dd>${agentBadge(database)} <span class="muted">lease ${agent.live ? 'expires' : 'expired'} ${formatRelative(agent.expiresAt)}</span></dd>
  <dt>Last report</dt><dd title="${formatTime(agent.lastReportAt)}">${formatRelative(agent.lastReportAt)}${agent.lastSeq !== null ? html` <span class="muted">(#${agent.lastSeq})</span>` : ''}</dd>
  <dt>Host</dt><dd>${agent.hostname} <span class="muted">pid ${agent.pid}</span></dd>
  <dt>Agent</dt><dd>tuner-agent ${agent.agentVersion} · --${agent.target} · ${agent.mode}${agent.allowRestart ? ' (may restart)' : ''}</dd>
  <dt>Database</dt><dd>${agent.targetIdentity}</dd>
  <dt>PostgreSQL</dt><dd>${agent.system.serverVersion}</dd>
  <dt>Machine</dt><dd>${agent.system.machine ? `${describeMachine(agent.system.machine)} (${agent.system.machine.source})` : html`<span class="muted">unknown</span>`}</dd>
  <dt>Started</dt><dd>${formatTime(agent.startedAt)}</dd>
  ${agent.system.applyBlockedReason ? html`<dt>Changes</dt><dd><span class="badge bad">blocked</span> ${agent.system.applyBlockedReason}</dd>` : ''}
  ${preflightRow(agent.system.preflight)}
</dl>`
    : html`<p class="empty">No agent has connected yet. <a href="/databases/${database.id}/setup">Set one up</a>.</p>`;
  return html`<div class="card"><h2>Agent</h2>${body}
<form class="stack" method="post" action="/databases/${database.id}/report-interval">
  ${csrfField(input.login)}
  <h3>Report interval</h3>
  <div class="row"><label>Seconds between reports<span class="hint">Now ${interval} s${database.reportIntervalSeconds === null ? ' (the service default)' : ''}; empty for the default.</span>
    <input type="number" name="reportIntervalSeconds" min="${REPORT_INTERVAL_SECONDS.min}" max="${REPORT_INTERVAL_SECONDS.max}" value="${database.reportIntervalSeconds ?? ''}"></label>
  <div><button type="submit" class="secondary">Save</button></div></div>
</form></div>`;
}

function metricTiles(metrics: MetricsReport | null, series: readonly ReportPoint[]): Html {
  const d = metrics?.derived;
  const conn = metrics?.activity;
  return html`<div class="grid five tiles">
  <div class="tile"><div class="label">Avg query runtime</div><div class="value" id="metric-avg-runtime">${formatMs(d?.avgQueryRuntimeMs)}</div>
    <div class="note">${d?.weightedQueryRuntimeMs != null ? `baseline mix: ${formatMs(d.weightedQueryRuntimeMs)}` : 'top-level statements'}</div>
    ${sparkline(
      series.map((p) => p.avgQueryRuntimeMs),
      'average query runtime, recent reports',
    )}</div>
  <div class="tile"><div class="label">Throughput</div><div class="value" id="metric-statements-per-second">${formatNumber(metrics ? statementsPerSecond(metrics) : null, 1)}</div>
    <div class="note">${THROUGHPUT_FIGURE}${d ? `: ${formatNumber(d.calls)} top-level statements in ${formatNumber(metrics?.interval.seconds, 0)} s` : ''}</div>
    ${sparkline(
      series.map((p) => p.statementsPerSecond),
      'statements per second (pg_stat_statements), recent reports',
    )}</div>
  <div class="tile"><div class="label">Commits / s (pg_stat_database)</div><div class="value" id="metric-tps">${formatNumber(d?.tps, 1)}</div>
    <div class="note" title="On PostgreSQL 15 and later a backend publishes its commits when it goes idle: a busy pool's arrive late and in bursts">commits + rollbacks; late under steady load</div>
    ${sparkline(
      series.map((p) => p.tps),
      'commits and rollbacks per second (pg_stat_database), recent reports',
    )}</div>
  <div class="tile"><div class="label">Cache hit ratio</div><div class="value" id="metric-cache-hit">${formatPercent(d?.cacheHitRatio)}</div>
    <div class="note">shared buffers, all databases</div>
    ${sparkline(
      series.map((p) => p.cacheHitRatio),
      'cache hit ratio, recent reports',
    )}</div>
  <div class="tile"><div class="label">Connections</div><div class="value" id="metric-connections">${conn ? `${conn.connections.total} / ${conn.maxConnections}` : '–'}</div>
    <div class="note">${conn ? `${conn.connections.active} active, ${conn.connections.idle} idle, ${conn.connections.idleInTransaction} idle in transaction` : ''}</div>
    ${sparkline(
      series.map((p) => p.connections),
      'connections, recent reports',
    )}</div>
</div>`;
}

function statementsCard(metrics: MetricsReport): Html {
  const top = metrics.statements.top.slice(0, TOP_STATEMENTS_SHOWN);
  const rows = top.map(
    (s) => html`<tr>
  <td class="query">${s.text !== undefined ? html`<code>${s.text}</code>` : html`<span class="muted">text not sent</span>`}<div class="muted mono">queryid ${s.queryId}</div></td>
  <td class="num">${formatNumber(s.calls)}</td><td class="num">${formatMs(s.meanExecTimeMs)}</td>
  <td class="num">${formatMs(s.totalExecTimeMs)}</td><td class="num">${formatNumber(s.rows)}</td>
</tr>`,
  );
  return html`<div class="card"><h2>Top statements <span class="muted">(by total time; ${metrics.statements.top.length} of ${metrics.statements.activeStatements} active in the last interval)</span></h2>
${top.length === 0 ? html`<p class="empty">No statement ran in the interval.</p>` : html`<table id="top-statements"><thead><tr><th>Statement</th><th class="num">Calls</th><th class="num">Mean</th><th class="num">Total</th><th class="num">Rows</th></tr></thead><tbody>${rows}</tbody></table>`}
</div>`;
}

function settingsCard(settings: readonly Setting[]): Html {
  const rows = [...settings]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((s) => {
      const knob = getKnob(s.name);
      return html`<tr>
  <td class="mono" title="${knob?.summary ?? ''}">${s.name}</td>
  <td class="num mono">${s.setting}${s.unit ? html` <span class="muted">${s.unit}</span>` : ''}</td>
  <td>${knob?.apply === 'restart' ? 'restart' : 'reload'}</td>
  <td class="muted">${s.source ?? ''}</td>
  <td>${s.pendingRestart ? html`<span class="badge warn">pending restart</span>` : ''}</td>
</tr>`;
    });
  return html`<div class="card"><h2>Settings of the catalog's parameters</h2>
${settings.length === 0 ? html`<p class="empty">The agent has not sent any settings yet.</p>` : html`<table id="settings"><thead><tr><th>Parameter</th><th class="num">Value</th><th>Applies on</th><th>Source</th><th></th></tr></thead><tbody>${rows}</tbody></table>`}
</div>`;
}

function describeCommand(command: Command): Html {
  if (command.kind === 'revert') return html`<strong>revert</strong> to ${command.to}`;
  if (command.kind === 'plan') {
    const asked = [
      ...command.candidates.map((c) =>
        Object.entries(c.values)
          .map(([k, v]) => `${k} = ${String(v)}`)
          .join(', '),
      ),
      ...(command.thresholds ?? []).map((t) => `the ${t.name} threshold between ${t.low} and ${t.high}`),
    ];
    return html`<strong>plan</strong> (asks the planner, changes nothing)${asked.map((a) => html`<div class="mono">${a}</div>`)}`;
  }
  const values = Object.entries(command.values).map(([k, v]) => html`<div class="mono">${k} = ${String(v)}</div>`);
  return html`<strong>apply</strong>${command.keep ? ' (keep)' : ' (trial)'}${command.allowRestart ? ', may restart' : ''}${values}`;
}

const STATE_BADGE: Record<ReturnType<typeof commandState>, string> = {
  pending: 'off',
  sent: 'warn',
  applied: 'ok',
  refused: 'bad',
  failed: 'bad',
};

function commandsCard(input: DashboardInput): Html {
  const { database, login } = input;
  const rows = input.commands.map((c) => {
    const state = commandState(c);
    const effective = c.outcome ? Object.entries(c.outcome.effective).map(([k, v]) => html`<div class="mono">${k} = ${v}</div>`) : [];
    return html`<tr>
  <td title="${formatTime(c.createdAt)}">${formatRelative(c.createdAt)}<div class="muted">${c.createdBy ?? ''}</div></td>
  <td>${describeCommand(c.command)}</td>
  <td><span class="badge ${STATE_BADGE[state]}">${state}</span>${c.sentCount > 1 && c.status !== 'done' ? html` <span class="muted">sent ${c.sentCount}×</span>` : ''}
    ${c.outcome?.restarted ? html`<div class="muted">restarted</div>` : ''}${c.outcome?.restored ? html`<div class="muted">previous values restored</div>` : ''}</td>
  <td>${effective}${c.outcome?.errors.map((e) => html`<div class="muted">${e}</div>`) ?? ''}</td>
</tr>`;
  });
  return html`<div class="card"><h2>Commands</h2>
${input.commands.length === 0 ? html`<p class="empty">No command yet.</p>` : html`<table id="commands"><thead><tr><th>Issued</th><th>Command</th><th>State</th><th>Effective values / errors</th></tr></thead><tbody>${rows}</tbody></table>`}
<form class="stack" method="post" action="/databases/${database.id}/commands">
  ${csrfField(login)}
  <h3>Issue a command</h3>
  <p class="muted">The agent checks every value against its own catalog and bounds, and refuses what is unsafe.</p>
  <label>Kind<select name="kind" id="command-kind"><option value="apply">apply values</option><option value="revert">revert</option></select></label>
  <div data-kind="apply">
    <label>Values<span class="hint">One NAME=VALUE a line, in the pg_settings unit or with a unit: work_mem=64MB</span><textarea name="values" placeholder="work_mem=64MB&#10;random_page_cost=1.1"></textarea></label>
    <label class="check"><input type="checkbox" name="keep" value="true"> Keep: make this the agent's known-good configuration (else a trial)</label>
    <label class="check"><input type="checkbox" name="allowRestart" value="true"> The agent may restart the server to apply these (restart mode only)</label>
  </div>
  <div data-kind="revert"><label>Revert to<select name="to"><option value="known-good">known-good configuration</option><option value="baseline">baseline (what the agent found)</option></select></label></div>
  <button type="submit">Send to the agent</button>
</form></div>`;
}

function eventsCard(events: readonly StoredEvent[]): Html {
  if (events.length === 0) return html``;
  const badge = { info: 'off', warn: 'warn', error: 'bad' } as const;
  return html`<div class="card"><h2>Agent events</h2><table><thead><tr><th>When</th><th>Level</th><th>Code</th><th>Message</th></tr></thead><tbody>
${events.map((e) => html`<tr><td title="${formatTime(e.at)}">${formatRelative(e.at)}</td><td><span class="badge ${badge[e.level]}">${e.level}</span></td><td class="mono">${e.code}</td><td>${e.message}${e.commandId ? html`<div class="muted mono">command ${e.commandId}</div>` : ''}</td></tr>`)}
</tbody></table></div>`;
}

function machineCard(report: StoredReport | null): Html {
  const metrics = report?.targetMetrics ?? [];
  if (metrics.length === 0) return html``;
  const byName = new Map(metrics.map((m) => [m.name, m]));
  const total = byName.get('memory_total_bytes')?.value;
  const available = byName.get('memory_available_bytes')?.value;
  const cpu = byName.get('cpu_percent')?.value;
  const others = metrics.filter((m) => !['memory_total_bytes', 'memory_available_bytes', 'cpu_percent'].includes(m.name)).slice(0, 30);
  return html`<div class="card"><h2>Machine</h2>
<dl class="kv" id="machine">
  ${available !== undefined ? html`<dt>Memory available</dt><dd>${formatBytes(available)}${total !== undefined ? html` of ${formatBytes(total)} <span class="muted">(${formatPercent(available / total)})</span>` : ''}</dd>` : ''}
  ${cpu !== undefined ? html`<dt>CPU</dt><dd>${formatNumber(cpu, 1)} %</dd>` : ''}
  ${others.map((m) => html`<dt class="mono">${m.name}</dt><dd>${formatNumber(m.value, 2)} ${m.unit}</dd>`)}
</dl></div>`;
}

export function dashboardPage(input: DashboardInput): Html {
  const { database, report } = input;
  const metrics = report?.metrics ?? null;
  const settings = report?.settings.length ? report.settings : (database.agent?.system.settings ?? []);
  return page({
    title: database.name,
    login: input.login,
    nav: 'databases',
    body: html`<h1>${database.name}</h1>
<p class="sub">${database.target} · <code>${database.id}</code> · <a href="/databases/${database.id}/setup">Agent setup and API keys</a> · <a href="/databases/${database.id}/audit">Audit log</a> ·
${report ? html`latest report ${formatRelative(report.receivedAt)}${metrics ? html`, covering ${formatNumber(metrics.interval.seconds, 0)} s` : ' (no metrics: collection failed in that interval)'}` : 'no report yet'}</p>
${input.notice ? html`<div class="notice ${input.notice.kind}" role="${input.notice.kind === 'bad' ? 'alert' : 'status'}">${input.notice.text}</div>` : ''}
${metricTiles(metrics, input.series)}
<div class="grid two">
  ${agentCard(input)}
  <div>${machineCard(report)}${eventsCard(input.events)}</div>
</div>
${input.advice ? adviceCard(input.advice, input.tuning !== undefined && !database.agent?.system.applyBlockedReason) : ''}
${input.tuning ? tuningSessionSection({ ...input.tuning, login: input.login, database }) : ''}
${metrics ? statementsCard(metrics) : ''}
${commandsCard(input)}
${settingsCard(settings)}`,
  });
}

/** What the agent's preflight found wrong when it started (the same lines as tuner-agent --check). */
function preflightRow(problems: SystemInfo['preflight']): Html | '' {
  if (problems === undefined) return '';
  if (problems.length === 0) return html`<dt>Preflight</dt><dd><span class="badge ok">passed</span></dd>`;
  const items = problems.map(
    (p) =>
      html`<li><span class="badge ${p.status === 'fail' ? 'bad' : 'warn'}">${p.status === 'fail' ? 'FAIL' : 'WARN'}</span> ${p.name}: ${p.detail}${p.fix ? html` <span class="muted">fix: ${p.fix}</span>` : ''}</li>`,
  );
  return html`<dt>Preflight</dt><dd><ul class="preflight">${items}</ul></dd>`;
}
