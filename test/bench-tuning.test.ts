// CI runs the tuning benchmark in its short mode: the whole harness, end to end, on real
// clusters (no speed is asserted here: benchmarks print ratios, tests check behaviour).
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { findPgbench } from '../src/lab/pgbench.ts';
import { findPgBinaries } from '../src/lab/postgres-binaries.ts';

const run = promisify(execFile);

// The tuning benchmark measures with pgbench itself; CI always has it (.ci/run installs it).
const skip =
  findPgbench(findPgBinaries()) || process.env['CI'] === 'true'
    ? false
    : 'pgbench is not installed (Debian package postgresql-contrib): bench/tuning measures with it';

test(
  'bench/tuning --short: every contender searched and verified against the defaults, the noise measured, the goals printed',
  { skip },
  async () => {
    const { stdout } = await run(process.execPath, [join(import.meta.dirname, '..', 'bench', 'tuning.ts'), '--short'], {
      timeout: 900_000,
      maxBuffer: 8 * 1024 * 1024,
    });
    for (const workload of ['work-mem', 'select-1']) assert.match(stdout, new RegExp(`== ${workload}, reload-only`));
    assert.equal((stdout.match(/^ {2}noise, window to window .*unpinned \d/gm) ?? []).length, 2, stdout);
    const verified = stdout.match(/^ {4}(pgtune|random|tuner) +runtime /gm) ?? [];
    assert.equal(verified.length, 6, stdout);
    assert.equal((stdout.match(/^ {2}tuner +# ?\d+ +objective/gm) ?? []).length, 6, stdout);
    assert.equal((stdout.match(/^ {2}random +# ?\d+ +objective/gm) ?? []).length, 6, stdout);
    const verdict = '(yes|no|tie \\(within the intervals\\))';
    const goals = new RegExp(
      `^ {2}goals: tuner ≥ pgtune ${verdict}; ≥ random ${verdict}; ≥ 1\\.3× the defaults (yes|no) \\([\\d.]+×\\); tuner recommends`,
      'gm',
    );
    assert.equal((stdout.match(goals) ?? []).length, 2, stdout);
    // work-mem has a cached oracle (bench/oracles/work-mem.json): verified beside the others, fitted
    // into today's bounds where the catalog narrowed since it was found, never refused whole.
    assert.match(stdout, /^ {4}oracle +runtime [−+]\d+ % \(95 % CI/m);
    assert.doesNotMatch(stdout, /refused by the agent/);
    // The work-mem workload spills: the tuner's first trial is the diagnosis, with its evidence.
    assert.match(stdout, /^ {2}tuner +# 1 .* diagnosis: .*temporary files per minute .*work_mem 4MB→/m);
  },
);

test('bench/tuning refuses a bad --window, --warmup, --rounds, --open-loop or --workload before it starts anything: the flag named, no stack, status 2', async () => {
  for (const [flag, value, expected] of [
    ['--window', '0', /--window 0: expected a whole number of seconds, at least 1/],
    ['--warmup', 'ten', /--warmup ten: expected a whole number of seconds, at least 1/],
    ['--rounds', '1', /--rounds 1: expected a whole number of rounds from 2 to 50/],
    ['--rounds', 'many', /--rounds many: expected a whole number of rounds from 2 to 50/],
    ['--open-loop', '1.5', /--open-loop 1\.5: expected a share of the defaults' throughput, above 0 and at most 1/],
    ['--workload', 'tpch', /--workload: unknown workload tpch: expected one of .*work-mem.*jit, tpcc-like/],
  ] as const) {
    await assert.rejects(
      run(process.execPath, [join(import.meta.dirname, '..', 'bench', 'tuning.ts'), flag, value], { timeout: 60_000 }),
      (error: { stderr?: string; code?: number }) =>
        expected.test(error.stderr ?? '') && error.code === 2 && !/\n\s+at /.test(error.stderr ?? ''),
    );
  }
});

test(
  'bench/tuning stopped by SIGTERM (or Ctrl+C) removes its throwaway cluster: no server left running, no data directory left',
  { skip },
  async () => {
    const child = spawn(process.execPath, [join(import.meta.dirname, '..', 'bench', 'tuning.ts'), '--short', '--workload', 'select-1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    let dataDir: string | undefined;
    for (let waited = 0; !dataDir && waited < 60_000; waited += 100) {
      dataDir = /throwaway cluster in (\S+)/.exec(out)?.[1];
      await sleep(100);
    }
    assert.ok(dataDir, out);
    assert.ok(existsSync(dataDir));
    child.kill('SIGTERM');
    assert.equal(await exited, 130);
    assert.equal(existsSync(dataDir), false, `${dataDir} left behind`);
    const servers = execFileSync('ps', ['-eo', 'args'])
      .toString()
      .split('\n')
      .filter((line) => line.includes(dataDir));
    assert.deepEqual(servers, []);
  },
);

test('a cached oracle file that is no oracle is refused before anything starts: the file named, no stack, status 2', async () => {
  const file = join(import.meta.dirname, '..', 'bench', 'oracles', 'select-1.json');
  assert.equal(existsSync(file), false, 'select-1 has no oracle of its own to overwrite');
  writeFileSync(file, '{"workload": "select-1", "config": {"work_mem": [4096]}}\n');
  try {
    await assert.rejects(
      run(process.execPath, [join(import.meta.dirname, '..', 'bench', 'tuning.ts'), '--workload', 'select-1'], { timeout: 60_000 }),
      (error: { stdout?: string; stderr?: string; code?: number }) =>
        /select-1\.json is no oracle file \(.*config\.work_mem.*\): delete it, or write it again with --oracle/s.test(error.stderr ?? '') &&
        error.code === 2 &&
        !/throwaway cluster/.test(error.stdout ?? '') &&
        !/\n\s+at /.test(error.stderr ?? ''),
    );
  } finally {
    rmSync(file, { force: true });
  }
});
