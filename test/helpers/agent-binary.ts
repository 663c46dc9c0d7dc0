// The single-file tuner-agent under test: TUNER_AGENT_BIN, or this machine's binary in dist/ when
// it is newer than the sources it was built from. CI builds it first (.ci/run); elsewhere the
// tests that need it are skipped with the command that builds it, and in CI they fail instead.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { binaryName } from '../../scripts/build-agent.ts';

const root = join(import.meta.dirname, '..', '..');
const BUILD_COMMAND = `npm run build:agent -- --target linux-${process.arch}`;

/** Everything a binary is built from: a newer file means a stale binary. */
const SOURCES = [
  'src/agent',
  'src/knobs',
  'src/protocol',
  'package.json',
  'package-lock.json',
  'scripts/build-agent.ts',
  'scripts/macho-sign.ts',
];

function newestSource(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((entry) => newestSource(join(path, entry))));
}

/** The binary of a target in dist/, if it is there and newer than its sources; else why not. */
export function builtBinary(
  target: string,
  buildCommand = `npm run build:agent -- --target ${target}`,
): { path: string } | { missing: string } {
  const built = join(root, 'dist', binaryName(target));
  if (!existsSync(built)) return { missing: `no ${built}: build it with ${buildCommand}` };
  const newest = Math.max(...SOURCES.map((s) => newestSource(join(root, s))));
  if (statSync(built).mtimeMs < newest) return { missing: `${built} is older than the sources: rebuild it with ${buildCommand}` };
  return { path: built };
}

function locate(): { path: string } | { missing: string } {
  const fromEnv = process.env['TUNER_AGENT_BIN'];
  if (fromEnv) return existsSync(fromEnv) ? { path: resolve(fromEnv) } : { missing: `TUNER_AGENT_BIN=${fromEnv} does not exist` };
  return builtBinary(`linux-${process.arch}`, BUILD_COMMAND);
}

const found = locate();
if ('missing' in found && process.env['CI']) throw new Error(`CI runs the agent tests against the binary, but ${found.missing}`);

/** The binary's path, or null. */
export const TEST_BINARY: string | null = 'path' in found ? found.path : null;
/** For node:test's `skip`: false when the binary is there, else why not. */
export const skipWithoutBinary: string | false = 'missing' in found ? found.missing : false;

/** For node:test's `skip`: the Debian tools a test runs, in CI required (.ci/run installs them). */
export function skipWithoutTools(...tools: string[]): string | false {
  const absent = tools.filter((tool) => {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
      return false;
    } catch {
      return true;
    }
  });
  if (absent.length === 0) return skipWithoutBinary;
  const message = `needs ${absent.join(', ')} (apt-get install ${absent.join(' ')})`;
  if (process.env['CI']) throw new Error(`CI: ${message}`);
  return message;
}
