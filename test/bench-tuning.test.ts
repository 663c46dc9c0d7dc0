// CI runs the tuning benchmark in its short mode: the whole harness, end to end, on real
// clusters (no speed is asserted here: benchmarks print ratios, tests check behaviour).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { findPgbench } from '../src/lab/pgbench.ts';
import { findPgBinaries } from '../src/lab/postgres-binaries.ts';

const run = promisify(execFile);

// The tuning benchmark measures with pgbench itself; CI always has it (.ci/run installs it).
const skip =
  findPgbench(findPgBinaries()) || process.env['CI'] === 'true'
    ? false
    : 'pgbench is not installed (Debian package postgresql-contrib): bench/tuning measures with it';

test('bench/tuning --short runs every workload and re-measures every final configuration', { skip }, async () => {
  const { stdout } = await run(process.execPath, [join(import.meta.dirname, '..', 'bench', 'tuning.ts'), '--short'], {
    timeout: 900_000,
    maxBuffer: 8 * 1024 * 1024,
  });
  for (const workload of ['tpcb-like', 'analytic']) assert.match(stdout, new RegExp(`== ${workload}, reload-only`));
  const finals = stdout.match(/^ {4}(defaults|pgtune|random|tuner) +\d/gm) ?? [];
  assert.equal(finals.length, 8, stdout);
  assert.equal((stdout.match(/tuner +# ?\d+ +objective/g) ?? []).length, 6);
});
