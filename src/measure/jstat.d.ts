// The functions of jstat (no types of its own) that the tuner uses.
declare module 'jstat' {
  const jStat: {
    studentt: {
      /** The quantile: x with P(T ≤ x) = p, for `dof` degrees of freedom. */
      inv(p: number, dof: number): number;
    };
    chisquare: {
      /** The quantile: x with P(X ≤ x) = p, for `dof` degrees of freedom. */
      inv(p: number, dof: number): number;
    };
    normal: {
      /** The quantile of the normal distribution of this mean and standard deviation. */
      inv(p: number, mean: number, sd: number): number;
      /** P(X ≤ x) for the normal distribution of this mean and standard deviation. */
      cdf(x: number, mean: number, sd: number): number;
    };
  };
  export default jStat;
}
