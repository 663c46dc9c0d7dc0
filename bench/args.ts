// A bench's command line: its flags parsed, and a bad one said plainly (its message, no stack,
// exit status 2), as every bench does.
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';

type Flags<T extends ParseArgsOptionsConfig> = ReturnType<typeof parseArgs<{ options: T }>>['values'];

export function benchArgs<const T extends ParseArgsOptionsConfig>(bench: string, options: T) {
  /** A bad flag: its message, no stack, exit status 2. */
  const usage = (message: string): never => {
    console.error(`${bench}: ${message}`);
    process.exit(2);
  };
  let flags: Flags<T>;
  try {
    flags = parseArgs({ options }).values;
  } catch (error) {
    return usage((error as Error).message);
  }
  /** A whole number from a flag, at least `min`, or a clear error naming it. */
  const whole = (flag: string, value: string | undefined, fallback: number, min: number): number => {
    if (value === undefined) return fallback;
    if (!/^\d+$/.test(value) || Number(value) < min) usage(`--${flag} ${value}: expected a whole number, at least ${min}`);
    return Number(value);
  };
  return { flags, usage, whole };
}
