// The README's main command, in the short mode CI can afford: a real cluster under a lab
// workload, the real service on embedded storage, the real tuner-agent process, and a tuning
// session that runs to its end. What it asserts is the demo's promise: a baseline, one line per
// window, the A/B rounds, the work_mem diagnosis verified at once as a step (told when it starts
// and when it is kept or not, with its interval), a last line that names the kept steps and the
// verified figure or says "no significant improvement" (never an unverified figure called
// faster), and nothing left behind; nor when SIGINT, SIGTERM or SIGHUP stops it.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { until } from './helpers/until.ts';

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
  // A trip is judged again after the baseline window that follows it (contaminated when that
  // window was just as slow): the line printed last for a window is its verdict.
  const verdicts = new Map<string, string>();
  for (const [, ordinal, verdict] of stdout.matchAll(
    /^# ?(\d+) (?:diagnosis|heuristic|explore) +(objective|failed|cancelled|contaminated)\b/gm,
  )) {
    verdicts.set(ordinal!, verdict!);
  }
  assert.equal([...verdicts.values()].filter((v) => v !== 'contaminated').length, 2, stdout);
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

/** The processes whose command line names `dir`, or that run in it. */
function processesUsing(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (args.includes(dir) || readlinkSync(`/proc/${pid}/cwd`).startsWith(dir)) found.push(`${pid} ${args}`);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

// Stopped by a signal, the demo leaves nothing behind: the cluster's postmaster stopped and its data
// directory removed, the load and the agent stopped, its working directory removed. Each signal
// at a point of its own: while the stack starts (the cluster up) and during the session.
for (const [signal, at] of [
  ['SIGHUP', /, data in \S+; load from/],
  ['SIGINT', /, data in \S+; load from/],
  ['SIGTERM', /^== a tuning session: /m],
] as const) {
  test(`${signal} (${at.source}): the demo stops and removes its cluster, its processes and its folders`, async () => {
    const child = spawn(process.execPath, [join(import.meta.dirname, '..', 'scripts', 'demo.ts'), '--short'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await until(`the demo to print ${at.source}`, () => Promise.resolve(at.test(out) || child.exitCode !== null), 180_000, 100);
      const dataDir = /, data in (\S+); load from/.exec(out)?.[1];
      const work = /^== working directory (\S+)/m.exec(out)?.[1];
      assert.ok(dataDir && work && existsSync(dataDir) && existsSync(work), out);
      assert.ok(processesUsing(dataDir).length > 0, 'the postmaster runs');
      child.kill(signal);
      assert.equal(await exited, 128 + constants.signals[signal], out);
      assert.match(out, new RegExp(`^== ${signal}: stopping`, 'm'));
      assert.deepEqual(processesUsing(dataDir), [], 'no server left running');
      assert.deepEqual(processesUsing(work), [], 'no agent or load left running');
      assert.equal(existsSync(dataDir), false, `${dataDir} left behind`);
      assert.equal(existsSync(work), false, `${work} left behind`);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
}
