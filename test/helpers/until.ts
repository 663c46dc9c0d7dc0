// The tests wait the way the benchmarks and the demo do (src/lab/until.ts).
export { until } from '../../src/lab/until.ts';

/**
 * A test's own deadline from the bounds of the waits it runs one after another, and a margin for
 * the steps between them. A test cancelled before its waits ran out says nothing about what it
 * tests: on a loaded machine each wait may use its whole bound, and it is the bounds (or the counts
 * the test asserts) that say whether the product is too slow, not the runner's deadline.
 */
export const timeoutFor = (waitsMs: readonly number[], marginMs = 30_000): number => waitsMs.reduce((sum, ms) => sum + ms, marginMs);
