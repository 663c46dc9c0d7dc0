// The README's main command, in the short mode CI can afford: a real cluster under a lab
// workload, the real service on embedded storage, the real tuner-agent process, and a tuning
// session that runs to its end. What it asserts is the demo's promise: a baseline, one line per
// window, the A/B rounds, a last line that is the verified figure or "no significant
// improvement" (never an unverified figure called faster), and nothing left behind.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const demoDirs = () => new Set(readdirSync(tmpdir()).filter((name) => name.startsWith('tuner-demo-')));

test('npm run demo -- --short runs a tuning session to its verified result and cleans up', async () => {
  const before = demoDirs();
  const started = Date.now();
  const { stdout } = await run(process.execPath, [join(import.meta.dirname, '..', 'scripts', 'demo.ts'), '--short'], {
    timeout: 600_000,
    maxBuffer: 4 * 1024 * 1024,
  });
  console.log(`demo --short: ${((Date.now() - started) / 1000).toFixed(0)} s`);
  assert.match(stdout, /^agent connected/m, stdout);
  assert.match(stdout, /^baseline: weighted query runtime \d+\.\d+ ms, \d+ transactions\/s$/m, stdout);
  const trials = stdout.match(/^# ?\d+ (diagnosis|heuristic|explore) +(objective \d+\.\d+|failed: |cancelled: |contaminated: )/gm) ?? [];
  assert.equal(trials.length - (stdout.match(/^# ?\d+ (diagnosis|heuristic|explore) +contaminated: /gm) ?? []).length, 1, stdout);
  // The work-mem workload spills to temporary files: the first trial is argued from that, and says so.
  assert.match(
    stdout,
    /^# ?1 diagnosis .*\n {4}why: [\d.]+[kMG]?B of temporary files per minute from \d+ statements? \(the largest spills [\d.]+[kMG]?B per call\): work_mem 4MB→\d+MB/m,
    stdout,
  );
  assert.match(stdout, /^# ?\d+ A\/B 1 baseline +runtime/m, stdout);
  assert.match(stdout, /^# ?\d+ A\/B 1 candidate +objective \d+\.\d+/m, stdout);
  assert.match(stdout, /^== result: session done/m, stdout);
  const last = stdout.trimEnd().split('\n').at(-1) ?? '';
  assert.match(
    last,
    /^(verified: runtime −\d+(\.\d)? % \(95 % CI −[\d.]+ % to −[\d.]+ %\), throughput .*, \d A\/B rounds; applied and kept as known-good|no significant improvement.*; the database stays on its known-good configuration)$/,
    stdout,
  );
  assert.doesNotMatch(stdout, /faster/, 'no figure is called faster');
  const leftBehind = [...demoDirs()].filter((name) => !before.has(name));
  assert.deepEqual(leftBehind, [], 'the demo removes its working directory');
});
