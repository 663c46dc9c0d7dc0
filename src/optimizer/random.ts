// Seeded randomness: the optimizer never calls Math.random, so the same inputs always give the
// same suggestion. sfc32 (Chris Doty-Humphrey's small fast counting generator) seeded by
// hashing every part of the seed with FNV-1a and spreading it with splitmix32.

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** Standard normal. */
  normal(): number;
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function splitmix32(state: number): () => number {
  let s = state >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** A generator determined by `parts` (seed, iteration, purpose…): equal parts, equal streams. */
export function createRng(...parts: ReadonlyArray<string | number>): Rng {
  const spread = splitmix32(fnv1a(parts.map(String).join('\u0000')));
  let a = spread();
  let b = spread();
  let c = spread();
  let d = spread();
  const next32 = () => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t;
  };
  // The first outputs of sfc32 are correlated with the seed: discard them.
  for (let i = 0; i < 12; i++) next32();

  let spare: number | undefined;
  const next = () => next32() / 4294967296;
  return {
    next,
    int: (n) => Math.floor(next() * n),
    normal: () => {
      if (spare !== undefined) {
        const s = spare;
        spare = undefined;
        return s;
      }
      // Box–Muller; 1 - u keeps the logarithm finite.
      const r = Math.sqrt(-2 * Math.log(1 - next()));
      const theta = 2 * Math.PI * next();
      spare = r * Math.sin(theta);
      return r * Math.cos(theta);
    },
  };
}
