// Advice between sessions (issue 31 part 3): the diagnoses a session starts with
// (src/optimizer/diagnose.ts) run on a database's latest reports, and each says what it argues
// for: the parameters and their direction, the figures behind it, and the statements that show
// it. Pure: the reports and the search space come in, nothing is applied; a person starts a
// session from the advice, and the session measures every change before anything is kept.
import { describeValue, getKnob, PAGE_BYTES, type KnobValue } from '../../knobs/index.ts';
import { diagnose, signalsOf, type Diagnosis, type SearchSpace, type WorkloadSignals } from '../../optimizer/index.ts';
import { currentValue } from '../../optimizer/space.ts';
import type { MetricsReport, StatementRow } from '../../protocol/report.ts';

export type AdviceFinding = Diagnosis['finding'];

/** One parameter a diagnosis moves. */
export interface AdviceChange {
  parameter: string;
  /** set: a value that is not a number (jit on → off). */
  direction: 'raise' | 'lower' | 'set';
  /** As people read them (4MB, on), and as pg_settings holds the new one. */
  from: string;
  to: string;
  value: number | string;
  /** The change needs a restart of the server (a session in restart mode). */
  restart: boolean;
}

/** A figure the diagnosis read, in its unit. */
export interface AdviceEvidence {
  name: string;
  value: number;
  unit: 'bytes' | 'bytes/min' | 'ratio' | 'ms' | 'count' | '1/s';
}

/** A statement behind the finding, with what it contributed, and its text as stored (redacted;
 * absent when the agent sends no texts). */
export interface AdviceStatement {
  queryId: string;
  calls: number;
  /** What ranks it for this finding, in the evidence's terms (temporary bytes per call, JIT ms,
   * blocks read, WAL bytes). */
  figure: { name: string; value: number; unit: AdviceEvidence['unit'] };
  text: string | null;
}

export interface AdviceItem {
  finding: AdviceFinding;
  /** The diagnosis' own sentence: the evidence, then the change. */
  reason: string;
  changes: AdviceChange[];
  evidence: AdviceEvidence[];
  statements: AdviceStatement[];
}

/** At most this many statements shown behind a finding. */
const STATEMENTS_SHOWN = 5;

function describe(name: string, value: KnobValue): string {
  const knob = getKnob(name);
  return knob ? describeValue(knob, value) : String(value);
}

function changesOf(space: SearchSpace, d: Diagnosis): AdviceChange[] {
  return Object.entries(d.changes).map(([parameter, value]) => {
    const dim = space.dimensions.find((x) => x.name === parameter);
    const current = dim ? currentValue(space, dim) : undefined;
    const direction = typeof value === 'number' && typeof current === 'number' ? (value > current ? 'raise' : 'lower') : ('set' as const);
    return {
      parameter,
      direction,
      from: current === undefined ? '?' : describe(parameter, current),
      to: describe(parameter, value),
      value,
      restart: getKnob(parameter)?.apply === 'restart',
    };
  });
}

interface StatementTotals {
  calls: number;
  figure: number;
  text: string | null;
}

/** The statements of the reports' top rows with the most of `figure`, most first. */
function statementsBy(
  reports: readonly MetricsReport[],
  figure: (row: StatementRow) => number,
  name: string,
  unit: AdviceEvidence['unit'],
  perCall = false,
): AdviceStatement[] {
  const totals = new Map<string, StatementTotals>();
  for (const report of reports) {
    for (const row of report.statements.top) {
      const value = figure(row);
      if (!(value > 0)) continue;
      const t = totals.get(row.queryId) ?? { calls: 0, figure: 0, text: null };
      t.calls += row.calls;
      t.figure += value;
      // The latest text seen: the newest redaction.
      if (row.text !== undefined) t.text = row.text;
      totals.set(row.queryId, t);
    }
  }
  const ranked = [...totals].map(([queryId, t]) => ({
    queryId,
    calls: t.calls,
    figure: { name, value: perCall ? (t.calls > 0 ? t.figure / t.calls : 0) : t.figure, unit },
    text: t.text,
    total: t.figure,
  }));
  return ranked
    .sort((a, b) => b.total - a.total || a.queryId.localeCompare(b.queryId))
    .slice(0, STATEMENTS_SHOWN)
    .map(({ total: _total, ...s }) => s);
}

const perSecond = (n: number, s: WorkloadSignals) => (s.seconds > 0 ? n / s.seconds : 0);

/** The figures each finding reads, and the statements that carry it. */
function behind(
  finding: AdviceFinding,
  s: WorkloadSignals,
  reports: readonly MetricsReport[],
): Pick<AdviceItem, 'evidence' | 'statements'> {
  switch (finding) {
    case 'temp-files':
      return {
        evidence: [
          { name: 'temporary files written per minute', value: 60 * perSecond(s.tempBytes, s), unit: 'bytes/min' },
          { name: 'largest temporary bytes per call', value: Math.max(0, ...s.spillers.map((x) => x.tempBytesPerCall)), unit: 'bytes' },
          { name: 'statements writing temporary files', value: s.spillers.length, unit: 'count' },
        ],
        statements: statementsBy(reports, (r) => r.tempBlksWritten * PAGE_BYTES, 'temporary bytes per call', 'bytes', true),
      };
    case 'jit-compilation':
      return {
        evidence: [
          { name: 'JIT share of execution time', value: s.execMs && s.jitMs ? s.jitMs / s.execMs : 0, unit: 'ratio' },
          { name: 'JIT compilation time', value: s.jitMs ?? 0, unit: 'ms' },
          { name: 'execution time', value: s.execMs ?? 0, unit: 'ms' },
          { name: 'statements compiling JIT code', value: s.jitStatements ?? 0, unit: 'count' },
        ],
        statements: statementsBy(reports, (r) => r.jitTimeMs ?? 0, 'JIT compilation time', 'ms'),
      };
    case 'wal-checkpoints':
      return {
        evidence: [
          { name: 'checkpoints requested (WAL volume or a command)', value: s.checkpointsRequested, unit: 'count' },
          { name: 'checkpoints by time', value: s.checkpointsTimed, unit: 'count' },
          { name: 'WAL written per minute', value: 60 * perSecond(s.walBytes ?? 0, s), unit: 'bytes/min' },
          ...(s.walFpi !== null && s.walRecords
            ? [{ name: 'full-page images share of WAL records', value: s.walFpi / s.walRecords, unit: 'ratio' as const }]
            : []),
        ],
        statements: statementsBy(reports, (r) => r.walBytes ?? 0, 'WAL bytes', 'bytes'),
      };
    case 'buffer-misses':
      return {
        evidence: [
          { name: 'buffer cache hit ratio', value: s.blksHit + s.blksRead > 0 ? s.blksHit / (s.blksHit + s.blksRead) : 1, unit: 'ratio' },
          { name: 'blocks read per second', value: perSecond(s.blksRead, s), unit: '1/s' },
        ],
        statements: statementsBy(reports, (r) => r.sharedBlksRead, 'shared blocks read', 'count'),
      };
  }
}

/** What the reports' statistics argue for, strongest first (the diagnoses' order), and the
 * signals they were read from (a session started from the advice keeps them). */
export function adviceFrom(space: SearchSpace, reports: readonly MetricsReport[]): { items: AdviceItem[]; signals: WorkloadSignals } {
  const signals = signalsOf(reports);
  const items = diagnose(space, signals).map((d) => ({
    finding: d.finding,
    reason: d.reason,
    changes: changesOf(space, d),
    ...behind(d.finding, signals, reports),
  }));
  return { items, signals };
}
