// The dashboard's tuning-session section: the session (state, what it waits for, its verified
// steps, its chart and iterations with their configuration diff against the baseline), the buttons
// that act on it (stop, approve, revert), the form that starts one, and the earlier sessions.
import type { ConfigChange } from '../tuning/space.ts';
import { TARGETS } from '../../agent/targets/registry.ts';
import { ENGINE_LIMITS } from '../tuning/engine/turn.ts';
import { SESSION_DEFAULTS, SESSION_LIMITS } from '../tuning/params.ts';
import { stepOutcomeWords } from '../tuning/steps.ts';
import type { iterationViews, tuningSessionView } from '../tuning/views.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import type { LoginSession } from '../people/store.ts';
import { ACTIVE_SESSION_STATES, type TuningIterationState, type TuningSessionRecord } from '../tuning/store.ts';
import { formatMs, formatNumber, formatRelative, formatTime } from './format.ts';
import { html, type Html } from './html.ts';
import { csrfField } from './layout.ts';
import { tuningSessionChart } from './tuning-session-chart.ts';

export interface TuningSessionSectionInput {
  login: LoginSession;
  database: DatabaseSummary;
  /** The session shown in detail (the latest, or the one asked for), with its iterations. */
  shown: { view: ReturnType<typeof tuningSessionView>; iterations: ReturnType<typeof iterationViews> } | null;
  /** The database's sessions, newest first. */
  tuningSessions: readonly TuningSessionRecord[];
}

const STATE_LABEL: Record<TuningSessionRecord['state'], { text: string; badge: string }> = {
  baseline: { text: 'measuring the baseline', badge: 'warn' },
  iterating: { text: 'tuning', badge: 'warn' },
  verifying: { text: 'verifying the best (A/B rounds)', badge: 'warn' },
  awaiting_approval: { text: 'awaiting approval', badge: 'ok' },
  applying_best: { text: 'applying the best', badge: 'warn' },
  done: { text: 'done', badge: 'ok' },
  stopped: { text: 'stopped', badge: 'off' },
  reverted: { text: 'reverted', badge: 'off' },
  failed: { text: 'failed', badge: 'bad' },
};

const ITERATION_BADGE: Record<TuningIterationState, string> = {
  planning: 'warn',
  applying: 'warn',
  measuring: 'warn',
  ok: 'ok',
  failed: 'bad',
  cancelled: 'off',
  contaminated: 'warn',
  plan_neutral: 'off',
  refused: 'bad',
};
const ACTIVE = new Set(ACTIVE_SESSION_STATES);

const ratio = (x: number | null | undefined) => (x === null || x === undefined ? '–' : x.toFixed(3));

function stateBadge(state: TuningSessionRecord['state'], id?: string): Html {
  const label = STATE_LABEL[state];
  return html`<span class="badge ${label.badge}"${id ? html` id="${id}"` : ''} data-state="${state}">${label.text}</span>`;
}

const SHOWN_CHANGES = 3;

/** The changes against the baseline: the first few, the rest behind a click (no script needed). */
function diffList(diff: readonly ConfigChange[], open = false): Html {
  if (diff.length === 0) return html`<span class="muted">as the baseline</span>`;
  const line = (d: ConfigChange) => html`<div class="mono diff">${d.name} <span class="muted">${d.baseline} →</span> ${d.value}</div>`;
  if (diff.length <= SHOWN_CHANGES + 1) return html`${diff.map(line)}`;
  return html`${diff.slice(0, SHOWN_CHANGES).map(line)}<details${open ? html` open` : ''}><summary class="muted">${diff.length - SHOWN_CHANGES} more changes</summary>${diff.slice(SHOWN_CHANGES).map(line)}</details>`;
}

function actionButton(
  input: TuningSessionSectionInput,
  sessionId: string,
  action: 'stop' | 'approve' | 'revert',
  label: string,
  style: string,
  confirm: string | null,
): Html {
  return html`<form class="inline" method="post" action="/databases/${input.database.id}/tuning-sessions/${sessionId}/${action}"${confirm ? html` data-confirm="${confirm}"` : ''}>
  ${csrfField(input.login)}<button type="submit" class="${style}" id="session-${action}">${label}</button></form>`;
}

type View = NonNullable<TuningSessionSectionInput['shown']>['view'];
type IterationView = NonNullable<TuningSessionSectionInput['shown']>['iterations'][number];

function progressText(p: NonNullable<View['progress']>, v: View): string {
  const measured = p.ok + p.failed;
  // Plan-aware sessions: trials the planner settled before any window ran.
  const settled = [
    p.planNeutral ? `${p.planNeutral} skipped as plan-neutral` : '',
    p.refused ? `${p.refused} refused before they ran (a plan regression)` : '',
  ].filter(Boolean);
  return (
    `${Math.min(measured, v.iterations)} of ${v.iterations} trials measured (${p.ok} ok, ${p.failed} failed${p.cancelled ? `, ${p.cancelled} cancelled` : ''})` +
    (settled.length > 0 ? `, ${settled.join(', ')}` : '') +
    `, ${p.baselineWindows} baseline window${p.baselineWindows === 1 ? '' : 's'} between them` +
    (p.abRounds ? `, ${p.abRounds} A/B round${p.abRounds === 1 ? '' : 's'} (${v.abRoundsMin}–${v.abRoundsMax})` : '') +
    (p.contaminated ? `, ${p.contaminated} contaminated window${p.contaminated === 1 ? '' : 's'} measured again` : '')
  );
}

const pct = (x: number) => `${x > 0 ? '+' : x < 0 ? '−' : '±'}${Math.abs(x * 100).toFixed(1)} %`;

/** The baseline's drift over the session and the noise of one window, as measured. */
function driftText(v: View): Html {
  const drift = v.drift;
  const noise = v.noise;
  if (!drift && noise === null) return html`<span class="muted">measured once so far</span>`;
  return html`${drift ? `${pct(drift.total)} over ${drift.windows} baseline windows (${pct(drift.perHour)} an hour)` : ''}${noise !== null && noise !== undefined ? `; noise of one window ${(noise * 100).toFixed(1)} %` : ''}`;
}

/** "600 s, down to 300 s once the noise is measured", or the length chosen from it. */
function windowWords(v: View): string {
  if (v.windowNowSeconds !== null)
    return `${v.windowNowSeconds} s windows (chosen from the measured noise; ${v.windowMinSeconds}–${v.windowSeconds} s allowed)`;
  return v.windowMinSeconds < v.windowSeconds
    ? `${v.windowSeconds} s windows, down to ${v.windowMinSeconds} s once the noise is measured`
    : `${v.windowSeconds} s windows`;
}

type StepView = View['steps'][number];

/** The kept step before step `n` (the known-good it was verified against), if any. */
const keptBefore = (v: View, n: number): StepView | undefined =>
  v.steps.filter((s) => s.n < n && s.outcome === 'kept' && s.keptAfter !== null).at(-1);

/** The step the verification is of, when it is a step's (verification.purpose). */
function verifiedStep(v: View): StepView | undefined {
  const verification = v.verification;
  if (verification?.purpose !== 'step') return undefined;
  return v.steps.filter((s) => s.iteration === verification.candidate.iteration).at(-1);
}

/** "Verification of step 2" or "Final verification": a step's verification happens mid-search, the final one at its end. */
function verificationLabel(v: View): string {
  if (!v.verification) return 'Verification';
  if (v.verification.purpose !== 'step') return 'Final verification';
  const step = verifiedStep(v);
  return step ? `Verification of step ${step.n}` : 'Verification of a step';
}

function stepPurpose(v: View, step: StepView | undefined): string {
  if (!step) return 'a big win verified as soon as it was seen; the search goes on after it';
  const before = keptBefore(v, step.n);
  return `step ${step.n} (below, with its statements): a big win verified as soon as it was seen, against ${before ? `step ${before.n}` : 'the baseline'}; the search goes on after it`;
}

function verificationText(v: View): Html {
  const verification = v.verification;
  const lastKept = keptBefore(v, Infinity);
  const against = lastKept ? `the last kept step (step ${lastKept.n})` : 'the baseline';
  if (!verification)
    return html`<span class="muted">after the search: the best against ${against}, ${v.abRoundsMin}–${v.abRoundsMax} A/B rounds, recommended only if the whole ${v.confidencePercent} % interval shows a gain of at least ${v.minEffectPercent} %</span>`;
  const verdict =
    verification.decision === 'recommend'
      ? html`<span class="badge ok">recommended</span>`
      : verification.decision === 'no_significant_improvement'
        ? html`<span class="badge off">no significant improvement</span>`
        : html`<span class="badge warn">measuring</span>`;
  const purpose =
    verification.purpose === 'step' ? stepPurpose(v, verifiedStep(v)) : `the search's recommendation at its end, against ${against}`;
  return html`${verdict} iteration ${verification.candidate.iteration}: ${verification.summary ?? 'no complete round yet'}<div class="muted small" id="session-verification-purpose">${purpose}</div>${verification.note ? html`<div class="muted small">${verification.note}</div>` : ''}`;
}

/** Each statement with 5 % or more of the baseline's time under a verified configuration (the
 * final verification's, or a step's), slowest first. */
function statementsTable(statements: StepView['statements'] | undefined, id: string): Html {
  if (!statements || statements.length === 0) return html``;
  const rows = statements.map(
    (c) => html`<tr>
  <td><code>${c.key}</code></td>
  <td class="num">${Math.round(c.share * 100)} %</td>
  <td class="num">${c.ratio ? html`×${c.ratio.estimate.toFixed(2)}<div class="muted small">×${c.ratio.low.toFixed(2)}–×${c.ratio.high.toFixed(2)}</div>` : '–'}</td>
  <td>${c.regression ? html`<span class="badge warn">regression</span>` : c.ratio && c.ratio.high < 1 ? html`<span class="badge ok">gain</span>` : html`<span class="muted">no clear change</span>`}</td>
</tr>`,
  );
  return html`<table id="${id}" class="small statements"><thead><tr><th>Statement (user:db:queryid)</th><th class="num" title="its share of the baseline's time">Share</th><th class="num" title="under the verified configuration over the known-good, paired by A/B round, with the verification's interval">Runtime</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** A step's per-statement changes behind a click (a page of steps stays short), open when one regressed. */
function stepStatements(step: StepView): Html {
  if (step.statements.length === 0) return html``;
  const regressions = step.statements.filter((c) => c.regression).length;
  const gains = step.statements.filter((c) => !c.regression && c.ratio && c.ratio.high < 1).length;
  const counts = [
    `${step.statements.length} heavy statement${step.statements.length === 1 ? '' : 's'}`,
    gains ? `${gains} with a gain` : '',
    regressions ? `${regressions} regression${regressions === 1 ? '' : 's'}` : '',
  ].filter(Boolean);
  return html`<details${regressions ? html` open` : ''}><summary class="muted">${counts.join(', ')}</summary>${statementsTable(step.statements, `session-step-${step.n}-statements`)}</details>`;
}

/** The plan changes behind a step, as the planner named them before its trial ran (plan-aware sessions). */
function stepPlanChanges(step: StepView): Html {
  if (step.planChanges.length === 0) return html``;
  const items = step.planChanges.map(
    (c) =>
      html`<li><code>${c.text ?? `queryid ${c.queryId}`}</code> <span class="muted">(${Math.round(c.shareOfTime * 100)} % of the time)</span>: ${c.words.join('; ')}</li>`,
  );
  return html`<div class="step-plans small" id="session-step-${step.n}-plans">the plan changes behind it:<ul>${items}</ul></div>`;
}

const STEP_BADGE: Record<StepView['outcome'], string> = {
  verifying: 'warn',
  awaiting_approval: 'warn',
  applying: 'warn',
  kept: 'ok',
  not_verified: 'off',
  refused: 'bad',
  not_kept: 'off',
};

/** One verified step: where it came from, its figures against the known-good of its time, what became of it. */
function stepItem(v: View, step: StepView): Html {
  const kept = step.outcome === 'kept' && step.keptAfter !== null;
  const before = keptBefore(v, step.n);
  const against = before ? `against step ${before.n}` : 'against the baseline';
  return html`<li class="session-step${kept ? ' kept' : ''}" id="session-step-${step.n}" data-outcome="${step.outcome}">
  <div><strong>Step ${step.n}</strong> <span class="muted">from iteration ${step.iteration}, verified ${against}</span> <span class="badge ${STEP_BADGE[step.outcome]}" data-outcome="${step.outcome}">${stepOutcomeWords[step.outcome]}</span>${kept ? html` <span class="known-good">the known-good configuration from window ${step.keptAfter! + 1} on</span>` : ''}</div>
  <div class="step-summary">${step.summary ?? html`<span class="muted">no complete A/B round yet</span>`}</div>
  ${step.note ? html`<div class="muted small">${step.note}</div>` : ''}
  <div class="step-diff">${diffList(step.diff, true)}</div>
  ${stepPlanChanges(step)}
  ${stepStatements(step)}
</li>`;
}

/** The session's verified steps in order (steps.ts): big wins verified as soon as they were seen. */
function stepsBlock(v: View): Html {
  if (v.steps.length === 0) return html``;
  return html`<div id="session-steps"><h3>Verified steps</h3>
<p class="muted small">A trial far enough below the known-good configuration is verified at once in A/B rounds; kept, it is the known-good configuration the search goes on from, and the trials after it are judged against it. Changes are from the baseline.</p>
<ol class="session-steps">${v.steps.map((step) => stepItem(v, step))}</ol></div>`;
}

const objectiveText = (it: IterationView, v: View): Html => {
  if (it.kind === 'baseline') {
    // After a kept step the known-good is that step: the ratio is its gain as well as the drift.
    const step = v.steps.filter((s) => s.outcome === 'kept' && s.keptAfter !== null && s.keptAfter < it.ordinal).at(-1);
    const title = step
      ? `runtime over the first baseline window's: step ${step.n}'s gain (the known-good since window ${step.keptAfter! + 1}) and the drift`
      : "runtime over the first baseline window's: the drift";
    return it.baselineRatio === null ? html`–` : html`<span class="muted" title="${title}">×${ratio(it.baselineRatio)}</span>`;
  }
  if (it.objective === null) return html`–`;
  return html`${ratio(it.objective)}${it.objectiveInterval ? html`<div class="muted small" title="95 % interval from the measured noise of one window">${ratio(it.objectiveInterval.low)}–${ratio(it.objectiveInterval.high)}</div>` : ''}`;
};

const kindText = (it: IterationView): string => (it.phase === 'verify' ? `A/B ${it.round ?? '?'}: ${it.kind}` : it.kind);

function iterationsTable(iterations: NonNullable<TuningSessionSectionInput['shown']>): Html {
  if (iterations.iterations.length === 0) return html`<p class="empty">No iteration yet.</p>`;
  const rows = iterations.iterations.map(
    (it) => html`<tr>
  <td class="num">${it.ordinal}</td>
  <td>${kindText(it)}<div class="muted small">${it.reason}</div></td>
  <td><span class="badge ${ITERATION_BADGE[it.state]}">${it.state === 'plan_neutral' ? 'plan-neutral' : it.state}</span>${it.failure ? html`<div class="muted small">${it.failure}</div>` : ''}${it.plans && it.state !== 'refused' ? html`<div class="muted small plan-note">planner: ${it.plans.note}</div>` : ''}</td>
  <td class="num">${objectiveText(it, iterations.view)}</td>
  <td class="num">${ratio(it.bestSoFar)}</td>
  <td class="num">${it.stats ? formatNumber(it.stats.throughput, 1) : '–'}</td>
  <td>${diffList(it.diff)}</td>
</tr>`,
  );
  return html`<table id="session-iterations"><thead><tr><th class="num">#</th><th>Kind</th><th>State</th><th class="num" title="runtime over the baseline's at the same time (1.0 = as fast, lower is better), with its 95 % interval">Objective</th><th class="num" title="the search's best so far, not verified">Best so far</th><th class="num" title="top-level statements completed per second">Stmts/s</th><th>Changes from the baseline</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** The step the session's best is, when it is one (a step awaiting approval, being applied, or kept). */
const bestStep = (v: View): StepView | undefined =>
  v.best
    ? v.steps.filter((s) => s.iteration === v.best!.iteration && s.outcome !== 'not_verified' && s.outcome !== 'refused').at(-1)
    : undefined;

/** Approving a step keeps it and the search goes on; approving the final recommendation ends the session. */
function approveLabel(v: View): string {
  const step = v.steps.find((s) => s.outcome === 'awaiting_approval');
  return step ? `Approve and keep step ${step.n}` : 'Approve and apply the best';
}

/** Where each kept step became the known-good configuration, for the chart. */
const keptMarks = (v: View) =>
  v.steps.flatMap((s) => (s.outcome === 'kept' && s.keptAfter !== null ? [{ after: s.keptAfter, label: `step ${s.n} kept` }] : []));

function shownTuningSession(input: TuningSessionSectionInput): Html {
  const shown = input.shown;
  if (!shown) return html``;
  const v = shown.view;
  const active = ACTIVE.has(v.state);
  const latest = input.tuningSessions[0]?.id === v.id;
  const points = shown.iterations
    .filter((it) => it.state === 'ok' || it.state === 'failed' || it.state === 'contaminated')
    .map((it) => ({
      ordinal: it.ordinal,
      kind: it.kind === 'baseline' ? ('baseline' as const) : it.phase === 'verify' ? ('candidate' as const) : ('trial' as const),
      value: it.kind === 'baseline' ? it.baselineRatio : it.state === 'ok' ? it.objective : null,
      interval: it.objectiveInterval,
      failed: it.state === 'failed',
      contaminated: it.state === 'contaminated',
      bestSoFar: it.bestSoFar,
    }));
  const progress = v.progress;
  const baseline = v.baseline.stats;
  return html`<div class="session" id="session" data-session-id="${v.id}">
<div class="session-head">
  <div>${stateBadge(v.state, 'session-state')} <span class="muted">started ${formatRelative(new Date(v.createdAt))} by ${v.createdBy ?? '?'} · ${v.mode} · ${v.iterations} trials of ${v.warmupSeconds} s warm-up + ${windowWords(v)} · ${v.abRoundsMin}–${v.abRoundsMax} A/B rounds · minimum effect ${v.minEffectPercent} % at ${v.confidencePercent} % confidence · seed ${v.seed}${v.requireApproval ? ' · approval required' : ''}${v.verifyEarly ? '' : ' · verified at the end only'}${v.statementRegressions === 'refuse' ? ' · statement regressions refused' : ''}${v.planAware ? ' · the planner asked before each trial' : ''}</span></div>
  <div class="actions">
    ${v.state === 'awaiting_approval' ? actionButton(input, v.id, 'approve', approveLabel(v), '', null) : ''}
    ${active ? actionButton(input, v.id, 'stop', 'Stop', 'secondary', 'Stop the tuning session? A trial configuration is reverted to known-good.') : ''}
    ${active || (latest && v.state !== 'reverted') ? actionButton(input, v.id, 'revert', 'Revert to baseline', 'danger', 'Revert the database to the configuration the agent found, and end the session?') : ''}
  </div>
</div>
${v.message ? html`<p id="session-message">${v.message}</p>` : ''}
${v.windowSeconds < SESSION_LIMITS.noisyBelowSeconds ? html`<div class="notice warn">Windows under ${SESSION_LIMITS.noisyBelowSeconds} s are noisy: for demos and tests.</div>` : ''}
<dl class="kv">
  ${v.fromAdvice ? html`<dt>Started from</dt><dd id="session-from-advice">the advice between sessions: ${v.fromAdvice.findings.join(', ')}, its diagnoses tried first</dd>` : ''}
  <dt>Progress</dt><dd id="session-progress">${progress ? progressText(progress, v) : '–'}</dd>
  <dt>Baseline</dt><dd>${baseline ? html`${formatMs(baseline.weightedRuntimeMs)} per query (baseline mix), ${formatNumber(baseline.throughput, 1)} statements/s (pg_stat_statements, the throughput judged), ${formatNumber(baseline.tps, 1)} commits/s (pg_stat_database), over ${v.baseline.reports ?? 0} reports` : html`<span class="muted">being measured</span>`}</dd>
  <dt>Drift</dt><dd id="session-drift">${driftText(v)}</dd>
  <dt>${verificationLabel(v)}</dt><dd id="session-verification">${verificationText(v)}${verifiedStep(v) ? '' : statementsTable(v.verification?.statements, 'session-statements')}</dd>
  ${v.best ? html`<dt>Recommended</dt><dd id="session-best">${bestStep(v) ? `step ${bestStep(v)!.n}: ` : ''}iteration ${v.best.iteration}, verified in ${v.best.measurements} A/B rounds${diffList(v.best.diff, true)}</dd>` : ''}
  ${v.endedAt ? html`<dt>Ended</dt><dd title="${formatTime(new Date(v.endedAt))}">${formatRelative(new Date(v.endedAt))}</dd>` : ''}
</dl>
${stepsBlock(v)}
${points.length > 0 ? tuningSessionChart(points, keptMarks(v)) : ''}
${iterationsTable(shown)}
</div>`;
}

function startForm(input: TuningSessionSectionInput): Html {
  const agent = input.database.agent;
  const restartPossible = agent?.allowRestart === true && TARGETS.capabilitiesOf(input.database.target).restart.mode !== 'never';
  return html`<form class="stack" method="post" action="/databases/${input.database.id}/tuning-sessions" id="session-start">
  ${csrfField(input.login)}
  <h3>Start a tuning session</h3>
  <p class="muted">The session measures the baseline, then tries one configuration per trial (the agent's guardrails watch it and revert it on their own), measuring the baseline again every ${ENGINE_LIMITS.baselineEvery} trials. Then it verifies the best against the baseline in A/B rounds, and recommends it only if the whole confidence interval shows at least the minimum effect.</p>
  <div class="row">
    <label>Trials<input type="number" name="iterations" min="1" max="${SESSION_LIMITS.maxIterations}" value="${SESSION_DEFAULTS.iterations}"></label>
    <label>Window (s)<span class="hint">Each configuration is measured this long at first</span><input type="number" name="windowSeconds" min="${SESSION_LIMITS.minWindowSeconds}" max="${SESSION_LIMITS.maxWindowSeconds}" value="${SESSION_DEFAULTS.windowSeconds}"></label>
    <label>Shortest window (s)<span class="hint">Windows shrink to what the measured noise needs, no shorter; empty: ${SESSION_DEFAULTS.windowMinSeconds} s, or the window if shorter</span><input type="number" name="windowMinSeconds" min="${SESSION_LIMITS.minWindowSeconds}" max="${SESSION_LIMITS.maxWindowSeconds}" placeholder="${SESSION_DEFAULTS.windowMinSeconds}"></label>
    <label>Warm-up (s)<span class="hint">After each apply, before measuring</span><input type="number" name="warmupSeconds" min="0" max="${SESSION_LIMITS.maxWarmupSeconds}" value="${SESSION_DEFAULTS.warmupSeconds}"></label>
    <label>Mode<select name="mode"><option value="reload-only">reload-only</option>${restartPossible ? html`<option value="restart">restart (the agent may restart the database)</option>` : ''}</select></label>
  </div>
  <div class="row">
    <label>A/B rounds, at least<span class="hint">Baseline and best alternate</span><input type="number" name="abRoundsMin" min="${SESSION_LIMITS.minAbRounds}" max="${SESSION_LIMITS.maxAbRounds}" value="${SESSION_DEFAULTS.abRoundsMin}"></label>
    <label>A/B rounds, at most<span class="hint">While the interval is too wide</span><input type="number" name="abRoundsMax" min="${SESSION_LIMITS.minAbRounds}" max="${SESSION_LIMITS.maxAbRounds}" value="${SESSION_DEFAULTS.abRoundsMax}"></label>
    <label>Minimum effect (%)<span class="hint">Smaller gains are not recommended</span><input type="number" name="minEffectPercent" min="0" max="${SESSION_LIMITS.maxMinEffectPercent}" step="any" value="${SESSION_DEFAULTS.minEffectPercent}"></label>
    <label>Confidence (%)<span class="hint">Of the verification's interval</span><input type="number" name="confidencePercent" min="${SESSION_LIMITS.minConfidencePercent}" max="${SESSION_LIMITS.maxConfidencePercent}" step="any" value="${SESSION_DEFAULTS.confidencePercent}"></label>
  </div>
  <label class="check"><input type="checkbox" name="requireApproval" value="true" checked> Require approval before the best configuration is kept</label>
  <label class="check"><input type="checkbox" name="verifyEarly" value="true" checked> Verify a big win as soon as it is seen, and go on searching from it</label>
  <label>A statement 25 % slower or more<span class="hint">One with 5 % or more of the baseline's time, under a configuration that is faster overall</span><select name="statementRegressions"><option value="approve">name it, and wait for approval</option><option value="refuse">do not recommend the configuration</option></select></label>
  <label>Ask the planner before each trial<span class="hint">Needs the agent's postgresql.include_plans: skips what changes no plan of the heavy statements, refuses a plan regression before it runs, and tries memory thresholds first</span><select name="planAware"><option value="">when the agent allows it</option><option value="true">yes</option><option value="false">no</option></select></label>
  <button type="submit">Start tuning</button>
</form>`;
}

/** The start form, or why no session can start: the agent cannot apply changes (a failed
 * prerequisite of its preflight, a default parameter group), the same reason a start gets. */
function startOrBlocked(input: TuningSessionSectionInput): Html {
  const blocked = input.database.agent?.system.applyBlockedReason;
  if (!blocked) return startForm(input);
  return html`<div class="notice warn" id="tuning-blocked" role="status"><strong>No tuning session can start</strong>: the agent cannot apply changes to this database: ${blocked}</div>`;
}

function earlierTuningSessions(input: TuningSessionSectionInput): Html {
  const others = input.tuningSessions.filter((s) => s.id !== input.shown?.view.id);
  if (others.length === 0) return html``;
  return html`<h3>Other sessions</h3><table id="session-list"><tbody>${others.map(
    (s) =>
      html`<tr><td><a href="/databases/${input.database.id}?session=${s.id}#session">${formatTime(s.createdAt)}</a></td><td>${stateBadge(s.state)}</td><td class="muted">${s.message ?? ''}</td></tr>`,
  )}</tbody></table>`;
}

export function tuningSessionSection(input: TuningSessionSectionInput): Html {
  const hasActive = input.tuningSessions.some((s) => ACTIVE.has(s.state));
  return html`<div class="card" id="tuning"><h2>Tuning session</h2>
${input.shown ? shownTuningSession(input) : html`<p class="empty">No tuning session yet.</p>`}
${hasActive ? '' : startOrBlocked(input)}
${earlierTuningSessions(input)}
</div>`;
}
