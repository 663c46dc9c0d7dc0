// The README's main command, in the short mode CI can afford: a real cluster under a lab
// workload, the real service on embedded storage, the real tuner-agent process, and a tuning
// session that runs to its end. What it asserts is the demo's promise: a baseline, one line per
// window, the A/B rounds, the work_mem diagnosis verified at once as a step (told when it starts
// and when it is kept or not, with its interval), a last line that names the kept steps and the
// verified figure or says "no significant improvement" (never an unverified figure called
// faster), and nothing left behind.
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
  assert.equal(trials.length - (stdout.match(/^# ?\d+ (diagnosis|heuristic|explore) +contaminated: /gm) ?? []).length, 2, stdout);
  // The work-mem workload spills to temporary files: the first trial is argued from that, and says so.
  assert.match(
    stdout,
    /^# ?1 diagnosis .*\n {4}why: [\d.]+[kMG]?B of temporary files per minute from \d+ statements? \(the largest spills [\d.]+[kMG]?B per call\): work_mem 4MB→\d+MB/m,
    stdout,
  );
  assert.match(stdout, /^# ?\d+ A\/B 1 baseline +runtime/m, stdout);
  assert.match(stdout, /^# ?\d+ A\/B 1 candidate +objective \d+\.\d+/m, stdout);
  // The diagnosis runs the report several times faster: it is verified at once, as step 1, and the
  // demo says so as it happens, then what became of it with its interval.
  const startLine = stdout.search(
    /^== step 1 \(iteration 1\): a big win, verified now against the baseline in A\/B rounds {2}\[work_mem 4MB→\d+MB/m,
  );
  assert.ok(startLine >= 0, stdout);
  const outcome =
    /^== step 1 \(iteration 1\) (kept|not verified|not recommended): runtime [−+]\d+(\.\d)? % \(95 % CI [−+][\d.]+ % to [−+][\d.]+ %\), throughput .*, \d A\/B rounds/m.exec(
      stdout,
    );
  assert.ok(outcome, stdout);
  assert.ok(startLine < stdout.search(/^# ?\d+ A\/B 1 baseline/m) && outcome.index > stdout.search(/^# ?\d+ A\/B 3 candidate/m), stdout);
  assert.match(stdout, /^== result: session done/m, stdout);
  const last = stdout.trimEnd().split('\n').at(-1) ?? '';
  const interval = 'runtime −\\d+(\\.\\d)? % \\(95 % CI −[\\d.]+ % to −[\\d.]+ %\\), throughput .*, \\d A\\/B rounds';
  assert.match(
    last,
    outcome[1] === 'kept'
      ? // The last line names the kept step, then what the search's end added.
        new RegExp(
          `^verified step kept: step 1 \\(iteration 1\\): ${interval}(; then .*)?; (the database stays on step 1, its known-good configuration|applied and kept as known-good)$`,
        )
      : new RegExp(
          `^(verified: ${interval}; applied and kept as known-good|no significant improvement.*; the database stays on its known-good configuration)$`,
        ),
    stdout,
  );
  assert.doesNotMatch(stdout, /faster/, 'no figure is called faster');
  const leftBehind = [...demoDirs()].filter((name) => !before.has(name));
  assert.deepEqual(leftBehind, [], 'the demo removes its working directory');
});
