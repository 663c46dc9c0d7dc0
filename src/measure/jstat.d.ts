// The one function of jstat (no types of its own) that src/measure uses.
declare module 'jstat' {
  const jStat: {
    studentt: {
      /** The quantile: x with P(T ≤ x) = p, for `dof` degrees of freedom. */
      inv(p: number, dof: number): number;
    };
  };
  export default jStat;
}
