// CI runs the calibration benchmark in its short mode: one session and its separate
// re-measurement, end to end on a real cluster with the real service and agent (no coverage is
// asserted from one session: the benchmark's figures are in docs/benchmarks.md).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);

test('bench/calibration --short runs a session, re-measures its candidate, and reports coverage and claims', async () => {
  const { stdout } = await run(process.execPath, [join(import.meta.dirname, '..', 'bench', 'calibration.ts'), '--short'], {
    timeout: 900_000,
    maxBuffer: 8 * 1024 * 1024,
  });
  assert.match(stdout, /^== 1 sessions on work-mem: 1 trials, 4 s windows, 3–3 A\/B rounds; each re-measured in 3 rounds$/m, stdout);
  assert.match(
    stdout,
    /^ {3}1 (recommend|no_significant_improvement) +\d +\d\.\d{3} \(\d\.\d{3}–\d\.\d{3}\) +\d\.\d{3} \(\d\.\d{3}–\d\.\d{3}\) +(yes|NO)$/m,
    stdout,
  );
  assert.match(stdout, /^coverage: [01] of 1 claimed intervals contain the re-measured ratio/m, stdout);
  assert.match(stdout, /^claims: [01] of 1 sessions recommended their candidate/m, stdout);
});
