// The test tiers: a test file is slow when it needs a throwaway PostgreSQL cluster, Chromium or
// the built agent binary, and fast otherwise. The tier is read from what the file imports (and
// what those modules import, and the scripts it runs by path), so a new test file lands in its
// tier without anyone editing a list. A need no import shows is declared in the file itself with
// a line `// test-tier: slow`.
//
//   node scripts/test-tiers.ts list        every test file, its tier and why
//   node scripts/test-tiers.ts fast|slow   runs that tier's files with node --test
//   … fast --alongside lint,typecheck      and those npm scripts at the same time (their output
//                                          is shown when they fail): lint is mostly one core's work
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = join(import.meta.dirname, '..');

/** What makes a test slow: these names imported from these modules ('*': any name). */
const SLOW_NEEDS: ReadonlyMap<string, ReadonlySet<string> | '*'> = new Map<string, ReadonlySet<string> | '*'>([
  ['src/lab/cluster.ts', new Set(['startCluster'])],
  ['src/lab/patroni.ts', new Set(['startPatroniLab'])],
  ['test/helpers/browser.ts', '*'],
  ['test/helpers/agent-binary.ts', '*'],
]);

const MARKER = /^\s*\/\/ test-tier: slow\b/m;

export type Tier = 'fast' | 'slow';

/** One dependency of a module: the module's path (from the root) and the value names it takes. */
interface Dependency {
  path: string;
  names: ReadonlySet<string> | '*';
}

/** `import … from '…'`, `export … from '…'` (not `import type`), and the scripts a test runs
 * as `join(import.meta.dirname, '..', 'dir', 'file.ts')`. */
function dependencies(file: string, text: string): Dependency[] {
  const out: Dependency[] = [];
  const here = dirname(file);
  const statement = /^(import|export)\s+([^;]*?)\s*from\s+'([^']+)'/gm;
  for (const [, , clause, spec] of text.matchAll(statement)) {
    if (!spec!.startsWith('.') || clause!.startsWith('type ')) continue;
    const names = /^\{([\s\S]*)\}$/.exec(clause!.trim());
    out.push({
      path: relative(root, resolve(here, spec!)),
      names: names
        ? new Set(
            names[1]!
              .split(',')
              .map((n) => n.trim())
              .filter((n) => n !== '' && !n.startsWith('type '))
              .map((n) => n.split(/\s+as\s+/)[0]!),
          )
        : '*',
    });
  }
  const script = /join\(\s*import\.meta\.dirname\s*,((?:\s*'[^']+'\s*,?)+)\)/g;
  for (const [, parts] of text.matchAll(script)) {
    const segments = [...parts!.matchAll(/'([^']+)'/g)].map((m) => m[1]!);
    if (segments.at(-1)?.endsWith('.ts')) out.push({ path: relative(root, resolve(here, ...segments)), names: '*' });
  }
  return out;
}

/** The slow names a dependency takes from a module of SLOW_NEEDS. */
function takenNeeds(need: ReadonlySet<string> | '*', names: ReadonlySet<string> | '*'): string[] {
  if (need === '*') return ['*'];
  return names === '*' ? [...need] : [...need].filter((n) => names.has(n));
}

const reasons = new Map<string, string | null>();

/** Why a module needs a cluster, Chromium or the binary (a chain of files), or null. */
function slowBecause(path: string): string | null {
  if (reasons.has(path)) return reasons.get(path)!;
  reasons.set(path, null); // an import cycle adds nothing
  const full = join(root, path);
  if (!existsSync(full)) return null;
  const text = readFileSync(full, 'utf8');
  let reason: string | null = MARKER.test(text) ? `${path} says test-tier: slow` : null;
  for (const dep of dependencies(full, text)) {
    if (reason) break;
    const need = SLOW_NEEDS.get(dep.path);
    if (need) {
      const taken = takenNeeds(need, dep.names);
      if (taken.length > 0) reason = `${path} → ${taken.join(', ')} from ${dep.path}`;
      continue;
    }
    const deeper = slowBecause(dep.path);
    if (deeper) reason = `${path} → ${deeper}`;
  }
  reasons.set(path, reason);
  return reason;
}

/** Runs a command; with 'pipe', keeps what it printed for later. */
function run(command: string, args: string[], stdio: 'pipe' | 'inherit'): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: stdio === 'pipe' ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let output = '';
    child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

function testFiles(dir = 'test'): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** Every test file with its tier, and for a slow one why. */
export function testTiers(): Array<{ file: string; tier: Tier; reason: string | null }> {
  return testFiles()
    .sort()
    .map((file) => {
      const reason = slowBecause(file);
      return { file, tier: reason ? 'slow' : 'fast', reason };
    });
}

if (import.meta.main) {
  const which = process.argv[2];
  if (which === 'list') {
    for (const { file, tier, reason } of testTiers()) console.log(`${tier}  ${file}${reason ? `  (${reason})` : ''}`);
  } else if (which === 'fast' || which === 'slow') {
    const files = testTiers()
      .filter((t) => t.tier === which)
      .map((t) => t.file);
    const alongside = process.argv[3] === '--alongside' ? (process.argv[4] ?? '').split(',').filter(Boolean) : [];
    const checks = alongside.map((script) => run('npm', ['run', script], 'pipe').then((r) => ({ script, ...r })));
    const tests = await run(process.execPath, ['--test', '--test-concurrency=2', ...files], 'inherit');
    let failed = tests.code !== 0;
    for (const check of await Promise.all(checks)) {
      if (check.code === 0) continue;
      failed = true;
      process.stderr.write(`\nnpm run ${check.script} failed (exit ${check.code}):\n${check.output}\n`);
    }
    process.exit(failed ? 1 : 0);
  } else {
    console.error('usage: node scripts/test-tiers.ts list | fast | slow');
    process.exit(2);
  }
}
