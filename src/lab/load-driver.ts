// A small load driver for machines without pgbench (the embedded server builds have none): it
// runs the lab workloads' pgbench scripts itself, closed-loop (each client starts its next
// transaction when the last one ends) or at a fixed rate (transactions are scheduled at even
// intervals across the clients, as `pgbench --rate` does, whether or not the server keeps up).
// It understands the subset of pgbench's script language that src/lab/workloads.ts uses:
// `\set name random(lo, hi)` with integer arithmetic on constants and variables, and one SQL
// statement per line with `:name` variables. Anything else is refused when the script is read.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

type Step = { kind: 'set'; name: string; lo: string; hi: string } | { kind: 'sql'; text: string };

/** Parses a script; `variables` are given from outside (pgbench's `:scale`). */
export function parseScript(script: string): Step[] {
  const steps: Step[] = [];
  for (const [index, raw] of script.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('--')) continue;
    const set = /^\\set\s+(\w+)\s+random\((.+),(.+)\)$/.exec(line);
    if (set) {
      steps.push({ kind: 'set', name: set[1]!, lo: set[2]!.trim(), hi: set[3]!.trim() });
      continue;
    }
    if (line.startsWith('\\'))
      throw new Error(`script line ${index + 1}: the built-in load driver does not run "${line}" (only \\set name random(lo, hi))`);
    steps.push({ kind: 'sql', text: line.replace(/;\s*$/, '') });
  }
  return steps;
}

/** `100000 * :scale`, `:id + 0`, `-5000`: integers and variables joined by + - *, with * first. */
export function evaluate(expression: string, variables: ReadonlyMap<string, number>): number {
  const tokens: string[] = [...(expression.match(/:\w+|\d+|[+*-]/g) ?? [])];
  if (tokens.join('') !== expression.replace(/\s+/g, ''))
    throw new Error(`cannot evaluate "${expression}": only integers, :variables and + - *`);
  // A leading minus negates the first term: `-5000` is `0 - 5000`.
  if (tokens[0] === '-') tokens.unshift('0');
  const value = (token: string | undefined): number => {
    if (token === undefined) throw new Error(`"${expression}" ends early`);
    if (token.startsWith(':')) {
      const v = variables.get(token.slice(1));
      if (v === undefined) throw new Error(`"${expression}": no variable ${token}`);
      return v;
    }
    if (!/^\d+$/.test(token)) throw new Error(`"${expression}": expected a number or a variable, got "${token}"`);
    return Number(token);
  };
  // Sum of products, left to right.
  let sum = 0;
  let sign = 1;
  let product = value(tokens[0]);
  for (let i = 1; i < tokens.length; i += 2) {
    const op = tokens[i];
    const next = value(tokens[i + 1]);
    if (op === '*') product *= next;
    else {
      sum += sign * product;
      sign = op === '-' ? -1 : 1;
      product = next;
    }
  }
  return sum + sign * product;
}

function substitute(text: string, variables: ReadonlyMap<string, number>): string {
  return text.replace(/:(\w+)/g, (whole, name: string) => {
    const v = variables.get(name);
    return v === undefined ? whole : String(v);
  });
}

export interface DriverOptions {
  connectionString: string;
  clients: number;
  /** Transactions per second over all clients (open loop); closed-loop without it. */
  rate?: number;
  /** Variables the script reads, such as `scale`. */
  variables?: Record<string, number>;
}

export interface RunningDriver {
  /** Transactions (script runs) completed so far, and those that failed. */
  readonly transactions: number;
  readonly failed: number;
  stop(): Promise<void>;
}

export async function startDriver(script: string, options: DriverOptions): Promise<RunningDriver> {
  const steps = parseScript(script);
  const clients = await Promise.all(
    Array.from({ length: options.clients }, async () => {
      const client = new pg.Client({ connectionString: options.connectionString, application_name: 'tuner-lab-load' });
      // A server restarted by a trial drops the connection; the loop reconnects (below).
      client.on('error', () => undefined);
      await client.connect();
      return client;
    }),
  );
  let stopping = false;
  let transactions = 0;
  let failed = 0;
  const started = Date.now();
  let scheduled = 0;
  /** Open loop: the time the next transaction is due, shared by all clients. */
  const nextSlot = (): number => started + (scheduled++ * 1000) / options.rate!;

  const loop = async (initial: pg.Client): Promise<void> => {
    let client: pg.Client | null = initial;
    const variables = new Map(Object.entries(options.variables ?? {}));
    while (!stopping) {
      if (options.rate !== undefined) {
        const wait = nextSlot() - Date.now();
        if (wait > 0) await sleep(wait);
        if (stopping) break;
      }
      try {
        if (!client) {
          client = new pg.Client({ connectionString: options.connectionString, application_name: 'tuner-lab-load' });
          client.on('error', () => undefined);
          await client.connect();
        }
        for (const step of steps) {
          if (step.kind === 'set') {
            const lo = evaluate(step.lo, variables);
            const hi = evaluate(step.hi, variables);
            variables.set(step.name, lo + Math.floor(Math.random() * (hi - lo + 1)));
          } else {
            await client.query(substitute(step.text, variables));
          }
        }
        transactions++;
      } catch {
        failed++;
        // A broken session (a restart, a terminated backend) is replaced; a failed statement in a
        // transaction block is rolled back so the next run starts clean.
        const broken: pg.Client | null = client;
        client = null;
        await broken?.end().catch(() => undefined);
        if (!stopping) await sleep(100);
      }
    }
    await client?.end().catch(() => undefined);
  };
  const running = Promise.all(clients.map(loop));
  return {
    get transactions() {
      return transactions;
    },
    get failed() {
      return failed;
    },
    async stop() {
      stopping = true;
      await running;
    },
  };
}
