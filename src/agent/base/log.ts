// One line per event on stderr (stdout is for --once JSON and --check results), always redacted.
import { redact } from './redact.ts';

export type Level = 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface LoggerOptions {
  debug?: boolean;
  write?: (line: string) => void;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const emit = (level: Level, message: string) => {
    if (level === 'debug' && !options.debug) return;
    write(`${new Date().toISOString()} ${level.padEnd(5)} ${redact(message)}\n`);
  };
  return {
    debug: (m) => emit('debug', m),
    info: (m) => emit('info', m),
    warn: (m) => emit('warn', m),
    error: (m) => emit('error', m),
  };
}

/** The message of anything thrown, redacted; never a stack unless debugging. */
export function errorMessage(err: unknown): string {
  return redact(err instanceof Error ? err.message : String(err));
}
