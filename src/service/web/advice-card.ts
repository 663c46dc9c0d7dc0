// The dashboard's advice between sessions: what the diagnoses argue for on the latest reports,
// each with its parameters, the figures it read and the statements behind it, and a button that
// submits the start form below (its settings, the person's) with the marker that seeds the
// session with this advice. Nothing here applies anything.
import type { AdviceAnswer } from '../advice/queries.ts';
import type { AdviceEvidence, AdviceItem } from '../advice/advice.ts';
import { formatMs, formatNumber, formatPercent } from './format.ts';
import { formatBytes } from '../../knobs/index.ts';
import { html, type Html } from './html.ts';

const FINDING_TITLES: Record<AdviceItem['finding'], string> = {
  'temp-files': 'Temporary files',
  'jit-compilation': 'JIT compilation',
  'wal-checkpoints': 'Checkpoints forced by WAL volume',
  'buffer-misses': 'Buffer cache misses',
};

function figure(value: number, unit: AdviceEvidence['unit']): string {
  switch (unit) {
    case 'bytes':
      return formatBytes(value);
    case 'bytes/min':
      return `${formatBytes(value)}/min`;
    case 'ratio':
      return formatPercent(value);
    case 'ms':
      return formatMs(value);
    case '1/s':
      return `${formatNumber(value, 1)}/s`;
    case 'count':
      return formatNumber(value);
  }
}

function itemBlock(item: AdviceItem): Html {
  const changes = item.changes.map(
    (c) =>
      html`<li class="advice-change"><span class="mono">${c.parameter}</span> <strong>${c.direction}</strong> ${c.from} → ${c.to}${c.restart ? html` <span class="badge warn">restart</span>` : ''}</li>`,
  );
  const evidence = item.evidence.map((e) => html`<dt>${e.name}</dt><dd>${figure(e.value, e.unit)}</dd>`);
  const statements = item.statements.map(
    (s) => html`<tr>
  <td class="query">${s.text !== null ? html`<code>${s.text}</code>` : html`<span class="muted">text not sent</span>`}<div class="muted mono">queryid ${s.queryId}</div></td>
  <td class="num">${formatNumber(s.calls)}</td><td class="num">${figure(s.figure.value, s.figure.unit)} <span class="muted">${s.figure.name}</span></td>
</tr>`,
  );
  return html`<div class="advice-item" data-finding="${item.finding}">
  <h3>${FINDING_TITLES[item.finding]}</h3>
  <ul>${changes}</ul>
  <p>${item.reason}</p>
  <dl class="kv">${evidence}</dl>
  ${item.statements.length > 0 ? html`<table><thead><tr><th>Statement behind it</th><th class="num">Calls</th><th class="num">Figure</th></tr></thead><tbody>${statements}</tbody></table>` : ''}
</div>`;
}

/** Nothing while a session holds the database (its own diagnoses run at its start); `canStart`:
 * the start form is on the page (no session, nothing blocks it). */
export function adviceCard(advice: AdviceAnswer, canStart: boolean): Html | '' {
  if (advice.state === 'session_active') return '';
  if (advice.state !== 'advice') {
    return html`<div class="card" id="advice"><h2>Advice</h2><p class="empty">${advice.message}.</p></div>`;
  }
  const restart = advice.items.some((i) => i.changes.some((c) => c.restart));
  return html`<div class="card" id="advice"><h2>Advice <span class="muted">(${advice.message})</span></h2>
${advice.items.map(itemBlock)}
${
  canStart
    ? html`<p class="muted">Nothing is applied from advice alone: a session measures each change against the baseline, and its guardrails revert what hurts.${restart ? ` A change here needs a restart: choose restart mode in the form below (sessions in reload-only mode leave it out).` : ''}</p>
<button type="submit" form="session-start" name="fromAdvice" value="true" id="advice-start">Start a session with this advice first</button>
<span class="muted">with the settings of the start form below</span>`
    : ''
}
</div>`;
}
