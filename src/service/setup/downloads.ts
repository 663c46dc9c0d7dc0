// The tuner-agent binaries this service offers: the files named in the SHA256SUMS that
// `npm run build:agent` wrote beside them. The sums are served as they were written and never
// recomputed here: a binary changed after the build no longer matches, and the installer refuses it.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const SUMS_FILE = 'SHA256SUMS';

/** One binary: its file name (tuner-agent-<os>-<arch>, with .exe on Windows), its target and its SHA-256. */
export interface AgentDownload {
  file: string;
  target: string;
  sha256: string;
}

export interface DownloadsState {
  /** The binaries listed in SHA256SUMS whose files are there. */
  binaries: AgentDownload[];
  /** Why there is none, for the setup page; null when there are some. */
  missing: string | null;
}

const SUMS_LINE = /^([0-9a-f]{64}) [ *](tuner-agent-([a-z0-9]+-[a-z0-9]+)(?:\.exe)?)$/;

/** The lines of a SHA256SUMS file (as sha256sum writes it) that name agent binaries. */
export function parseSums(text: string): AgentDownload[] {
  const out: AgentDownload[] = [];
  for (const line of text.split('\n')) {
    const m = SUMS_LINE.exec(line.trim());
    if (m) out.push({ sha256: m[1]!, file: m[2]!, target: m[3]! });
  }
  return out;
}

/** Read on every call: a build after the service started is served without a restart. */
export function readDownloads(dir: string): DownloadsState {
  const sumsPath = join(dir, SUMS_FILE);
  if (!existsSync(sumsPath)) return { binaries: [], missing: `no ${SUMS_FILE} in the downloads directory` };
  const binaries = parseSums(readFileSync(sumsPath, 'utf8')).filter((b) => existsSync(join(dir, b.file)));
  return { binaries, missing: binaries.length === 0 ? `${SUMS_FILE} names no binary that is there` : null };
}
