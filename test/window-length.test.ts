// Windows as long as the measured noise needs, and what a verification can still prove
// (src/service/tuning/window-length.ts), pure: the arithmetic docs/service.md quotes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pooledWindowNoise } from '../src/measure/drift.ts';
import { chooseWindowSeconds, smallestVerifiableGain, TARGET_WINDOW_NOISE } from '../src/service/tuning/window-length.ts';
import { SESSION_DEFAULTS, StartTuningSessionInputSchema } from '../src/service/tuning/params.ts';

const DEFAULTS = { minRounds: 3, maxRounds: 5, minEffect: 0.05, confidence: 0.95 };

test('the window shrinks with the square of the noise, within the bounds a person set', () => {
  const bounds = { min: 300, max: 600 };
  assert.equal(chooseWindowSeconds(TARGET_WINDOW_NOISE, 600, bounds), 600, 'at the target: as it is');
  assert.equal(chooseWindowSeconds(0.04, 600, bounds), 384, '600 × (0.04 / 0.05)²');
  assert.equal(chooseWindowSeconds(0.02, 600, bounds), 300, 'never under the shortest');
  assert.equal(chooseWindowSeconds(0.2, 600, bounds), 600, 'never over the longest');
});

test('the noise of windows of several lengths, scaled to the current one (variance ∝ 1/length)', () => {
  // Windows of 600 s varying by 3 %, then 150 s ones: at 150 s the law says 6 %.
  const long = [1, 1.03, 0.97, 1.03, 0.97].map((w, i) => ({ at: i * 1000, runtimeMs: 10 * w, seconds: 600 }));
  const atLong = pooledWindowNoise([long], 600)!;
  const atShort = pooledWindowNoise([long], 150)!;
  assert.ok(Math.abs(atShort / atLong - 2) < 1e-9, `${atShort} against ${atLong}`);
  assert.equal(pooledWindowNoise([long]), atLong, 'without a length to scale to: as measured');
});

test('the smallest gain a verification can prove grows with the noise; the minimum effect while it is unknown', () => {
  assert.equal(smallestVerifiableGain(null, DEFAULTS), 0.05);
  const at = (noise: number) => smallestVerifiableGain(noise, DEFAULTS);
  console.log(
    `smallest verifiable gain, 3–5 rounds at 95 %: σ 2 % → ${(at(0.02) * 100).toFixed(1)} %, 5 % → ${(at(0.05) * 100).toFixed(1)} %, 10 % → ${(at(0.1) * 100).toFixed(1)} %, 15 % → ${(at(0.15) * 100).toFixed(1)} %`,
  );
  assert.ok(at(0.02) < at(0.05) && at(0.05) < at(0.1) && at(0.1) < at(0.15));
  assert.ok(at(0.05) > 0.1 && at(0.05) < 0.2, `${at(0.05)}`);
  assert.ok(at(0.001) >= 0.05 && at(0.001) < 0.06, 'a quiet machine: about the minimum effect');
  // More rounds prove smaller gains.
  assert.ok(smallestVerifiableGain(0.1, { ...DEFAULTS, maxRounds: 8 }) < at(0.1));
});

test('the defaults: windows shrink to 5 minutes at most, and a short window set by hand stays fixed', () => {
  const defaults = StartTuningSessionInputSchema.parse({});
  assert.deepEqual(
    [defaults.iterations, defaults.windowSeconds, defaults.windowMinSeconds, defaults.abRoundsMin, defaults.abRoundsMax],
    [SESSION_DEFAULTS.iterations, 600, 300, 3, 5],
  );
  assert.equal(StartTuningSessionInputSchema.parse({ windowSeconds: 4 }).windowMinSeconds, 4);
  const refused = StartTuningSessionInputSchema.safeParse({ windowSeconds: 60, windowMinSeconds: 120 });
  assert.ok(!refused.success && refused.error.issues[0]!.path.join('.') === 'windowMinSeconds', JSON.stringify(refused));
});
