// The README's main command, in the short mode CI can afford: a real cluster under pgbench, the
// real service on embedded storage, the real tuner-agent process, and a tuning session that runs
// to its end. What it asserts is the demo's promise: a baseline, one line per iteration, a result,
// and nothing left behind.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const demoDirs = () => new Set(readdirSync(tmpdir()).filter((name) => name.startsWith('tuner-demo-')));

test('npm run demo -- --short runs a tuning session to its end and cleans up', async () => {
  const before = demoDirs();
  const { stdout } = await run(process.execPath, [join(import.meta.dirname, '..', 'scripts', 'demo.ts'), '--short'], { timeout: 600_000, maxBuffer: 4 * 1024 * 1024 });
  assert.match(stdout, /^agent connected/m, stdout);
  assert.match(stdout, /^baseline: weighted query runtime \d+\.\d+ ms, \d+ transactions\/s$/m, stdout);
  const iterations = stdout.match(/^# ?\d+ (heuristic|explore|remeasure) +(objective \d+\.\d+ × baseline|failed: |cancelled: )/gm) ?? [];
  // Three planned iterations, and up to two more that confirm a best measured only once.
  assert.ok(iterations.length >= 3 && iterations.length <= 5, stdout);
  assert.ok(iterations.slice(3).every((line) => line.includes('remeasure')), stdout);
  assert.match(stdout, /^== result: session done/m, stdout);
  const leftBehind = [...demoDirs()].filter((name) => !before.has(name));
  assert.deepEqual(leftBehind, [], 'the demo removes its working directory');
});
