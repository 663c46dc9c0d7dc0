// Telling that a server is a Patroni member, so that `--local` can refuse and name `--patroni`:
// ALTER SYSTEM on one member is invisible to the others, Patroni may overwrite it, and a
// failover leaves the new leader without it. Two signs, either one enough: Patroni's cache of
// the dynamic configuration (patroni.dynamic.json) in the data directory, when the agent runs on
// the database's host and may look there; or Patroni's REST API answering on the database's host.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Db } from '../../database/db.ts';

/** Patroni's default restapi port. */
export const PATRONI_DEFAULT_API_PORT = 8008;
const PROBE_TIMEOUT_MS = 2_000;

const StatusSchema = z.object({ patroni: z.object({ version: z.string(), scope: z.string() }).passthrough() }).passthrough();

export interface PatroniEvidence {
  /** What was found, for the message. */
  sign: string;
  scope?: string;
}

export interface DetectOptions {
  /** The database's host (from postgresql.connection_url). */
  host: string;
  /** REST API ports to try on that host; default Patroni's 8008. */
  apiPorts?: readonly number[];
}

/** Patroni's signs for the server behind `db`, or null when none is found. */
export async function detectPatroni(db: Db, options: DetectOptions): Promise<PatroniEvidence | null> {
  const [row] = await db.query<{ dir: string | null }>(`SELECT current_setting('data_directory', true) AS dir`).catch(() => []);
  const dataDir = row?.dir;
  if (dataDir && existsSync(join(dataDir, 'patroni.dynamic.json'))) {
    return { sign: `${join(dataDir, 'patroni.dynamic.json')} (Patroni's copy of its dynamic configuration) is in the data directory` };
  }
  const host = options.host.startsWith('/') ? 'localhost' : options.host;
  const hostInUrl = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  for (const port of options.apiPorts ?? [PATRONI_DEFAULT_API_PORT]) {
    for (const scheme of ['http', 'https']) {
      const url = `${scheme}://${hostInUrl}:${port}/patroni`;
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
        const parsed = StatusSchema.safeParse(await res.json());
        if (parsed.success) {
          return { sign: `Patroni ${parsed.data.patroni.version}'s REST API answers at ${url}`, scope: parsed.data.patroni.scope };
        }
      } catch {
        // Nothing there, not Patroni, or a certificate we do not trust: no sign.
      }
    }
  }
  return null;
}

/** The refusal `--local` gives on a Patroni member. */
export function localRefusal(evidence: PatroniEvidence): string {
  const cluster = evidence.scope ? ` of the Patroni cluster "${evidence.scope}"` : ' of a Patroni cluster';
  return (
    `this server is a member${cluster} (${evidence.sign}): --local would change one member behind Patroni's back ` +
    `(ALTER SYSTEM is not seen by the other members, Patroni may overwrite it, and a failover loses it). ` +
    `Use --patroni, which changes the cluster's dynamic configuration through Patroni's REST API (docs/patroni.md)`
  );
}
