// The tests wait the way the benchmarks and the demo do (src/lab/until.ts).
export { until } from '../../src/lab/until.ts';
