// The journal: a file in the agent's working directory that says what the agent found and what
// it changed, written *before* each change (temp file, fsync, rename) so that after a crash,
// SIGKILL or power loss the next start knows exactly what to return the database to.
//
//   baseline   the override layer as the agent first found it, per parameter it ever touched
//   settings   the effective pg_settings values at that time (what a revert must read back)
//   knownGood  the last configuration verified and accepted (starts equal to the baseline)
//   applied    what the agent last wrote and verified
//   inFlight   a change begun and not finished
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import type { Overrides } from '../../target/target.ts';

export const JOURNAL_FILE_NAME = 'tuner-agent.journal.json';

const override = z.discriminatedUnion('set', [z.object({ set: z.literal(false) }), z.object({ set: z.literal(true), value: z.string() })]);
const overrides = z.record(z.string(), override);

const journalSchema = z.object({
  version: z.literal(1),
  target: z.string(),
  baseline: overrides,
  baselineSettings: z.record(z.string(), z.string()),
  knownGood: overrides,
  applied: overrides,
  inFlight: z.object({ id: z.string(), startedAt: z.string(), from: overrides, to: overrides }).nullable(),
  updatedAt: z.string(),
});

export type JournalData = z.infer<typeof journalSchema>;

export class JournalError extends Error {
  override name = 'JournalError';
}

export class Journal {
  readonly path: string;
  #data: JournalData;

  private constructor(path: string, data: JournalData) {
    this.path = path;
    this.#data = data;
  }

  /** Opens the journal of `dir`, or starts an empty one in memory (written at the first change). */
  static open(dir: string, target: string): Journal {
    const path = join(dir, JOURNAL_FILE_NAME);
    if (!existsSync(path)) {
      const now = new Date().toISOString();
      return new Journal(path, {
        version: 1,
        target,
        baseline: {},
        baselineSettings: {},
        knownGood: {},
        applied: {},
        inFlight: null,
        updatedAt: now,
      });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new JournalError(
        `${path} is not valid JSON (${(err as Error).message}); it records the configuration to return to, so it was left as it is: repair it, or move it away only if the database is at the configuration you want to keep`,
      );
    }
    const result = journalSchema.safeParse(parsed);
    if (!result.success) {
      const issue = result.error.issues[0];
      throw new JournalError(
        `${path} is not a tuner-agent journal (${issue?.path.join('.') || 'root'}: ${issue?.message}); it was left as it is`,
      );
    }
    if (result.data.target !== target) {
      throw new JournalError(
        `${path} belongs to ${result.data.target}, not ${target}: one agent directory per database (see the spec); run this agent from its own directory`,
      );
    }
    return new Journal(path, result.data);
  }

  get data(): Readonly<JournalData> {
    return this.#data;
  }

  /** True when the database may not be at the known-good configuration: a change was cut off, or
   * the last applied configuration was never accepted. */
  needsRecovery(): boolean {
    return this.notAtKnownGood().length > 0;
  }

  /** The parameters that may not be at their known-good configuration: those of a change cut
   * off, and those applied but never accepted. */
  notAtKnownGood(): string[] {
    const d = this.#data;
    const unaccepted = Object.keys(d.applied).filter((name) => !sameOverride(d.applied[name], d.knownGood[name]));
    return [...new Set([...Object.keys(d.inFlight?.to ?? {}), ...unaccepted])];
  }

  /** Records the intended change before anything is written. `from` is the override layer now;
   * `settings` the effective values now, kept for parameters seen for the first time. */
  beginChange(id: string, from: Overrides, to: Overrides, settings: Record<string, string>): void {
    const d = this.#data;
    for (const [name, o] of Object.entries(from)) {
      if (!(name in d.baseline)) {
        d.baseline[name] = o;
        d.knownGood[name] = o;
        d.applied[name] = o;
        const s = settings[name];
        if (s !== undefined) d.baselineSettings[name] = s;
      }
    }
    d.inFlight = { id, startedAt: new Date().toISOString(), from, to };
    this.#write();
  }

  /** The change was written and read back; `accepted` makes it the new known-good. */
  finishChange(accepted: boolean): void {
    const d = this.#data;
    if (!d.inFlight) return;
    Object.assign(d.applied, d.inFlight.to);
    if (accepted) Object.assign(d.knownGood, d.inFlight.to);
    d.inFlight = null;
    this.#write();
  }

  /** The change was undone (restored to `from`); nothing of it remains applied. */
  abortChange(): void {
    const d = this.#data;
    if (!d.inFlight) return;
    Object.assign(d.applied, d.inFlight.from);
    d.inFlight = null;
    this.#write();
  }

  /** Accepts what is applied now as known-good. */
  acceptApplied(): void {
    Object.assign(this.#data.knownGood, this.#data.applied);
    this.#write();
  }

  #write(): void {
    this.#data.updatedAt = new Date().toISOString();
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeFileSync(fd, `${JSON.stringify(this.#data, null, 2)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    // The rename itself is durable only once the directory is synced. Windows opens no directory
    // for writing (EPERM): there the rename is as durable as NTFS's journal makes it.
    if (process.platform === 'win32') return;
    const dirFd = openSync(dirname(this.path), 'r');
    try {
      fsyncSync(dirFd);
    } finally {
      closeSync(dirFd);
    }
  }
}

export function sameOverride(a: Overrides[string] | undefined, b: Overrides[string] | undefined): boolean {
  if (!a || !b) return a === b;
  if (!a.set || !b.set) return a.set === b.set;
  return a.value === b.value;
}
