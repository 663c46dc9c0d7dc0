// CI runs the sessions benchmark in its short mode: one tiny select-1 session through the whole
// product (service, real agent, throwaway cluster), its windows counted as the benchmark defines
// them. No speed is asserted: benchmarks print figures, tests check behaviour.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const BENCH = join(import.meta.dirname, '..', 'bench', 'sessions.ts');

test('bench/sessions --short: a real select-1 session to its end, its windows counted from its rows, the summary printed', async () => {
  const { stdout } = await run(process.execPath, [BENCH, '--short'], { timeout: 300_000, maxBuffer: 8 * 1024 * 1024 });
  // The windows the session measured: the first baseline and every row in state ok, failed or contaminated.
  const rows = stdout.match(/^ {3}# ?\d+ .+? (ok|failed|contaminated|cancelled) /gm) ?? [];
  const measured = rows.filter((row) => !/ cancelled /.test(row)).length;
  assert.ok(measured >= 1, stdout);
  const result =
    /^-- select-1: (\w+); first verified gain after (—|\d+) windows.*; (\d+) windows to the end; [\d.]+ min; kept (a configuration|nothing)$/m.exec(
      stdout,
    );
  assert.ok(result, stdout);
  assert.equal(result[1], 'done', stdout);
  assert.equal(Number(result[3]), 1 + measured, stdout);
  // The end message is the session's own, and the summary has a row for the workload.
  assert.match(stdout, /^ {3}end message: (no significant improvement|verified|.+)/m);
  assert.match(stdout, /^select-1 +1 +[01] +[—\d.]+ +[\d.]+ \(\d+\) +[01] +— +[\d.]+$/m);
  assert.match(stdout, /^goals \(#30\): first verified gain ≤ 8 windows/m);
});

test('bench/sessions refuses a bad --window, --sessions or --workload before it starts anything: the flag named, status 2', async () => {
  for (const [flag, value, expected] of [
    ['--window', '1', /--window 1: expected a whole number, at least 2/],
    ['--sessions', 'many', /--sessions many: expected a whole number, at least 1/],
    ['--workload', 'tpch', /--workload: unknown workload tpch: expected one of .*work-mem/],
  ] as const) {
    await assert.rejects(
      run(process.execPath, [BENCH, flag, value], { timeout: 60_000 }),
      (error: { stderr?: string; stdout?: string; code?: number }) =>
        expected.test(error.stderr ?? '') && error.code === 2 && !/throwaway cluster/.test(error.stdout ?? ''),
    );
  }
});
