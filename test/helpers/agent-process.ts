// Runs the real tuner-agent bin as a child process, the way an operator would.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { join } from 'node:path';

export const AGENT_BIN = join(import.meta.dirname, '..', '..', 'bin', 'tuner-agent.js');

export interface AgentRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The test runner's own AGENT_* variables must not leak into the agent under test. */
function cleanEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AGENT_') && !k.startsWith('CLOUDB_')));
  return { ...env, ...extra };
}

export function runAgent(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<AgentRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [AGENT_BIN, ...args],
      { cwd: options.cwd, env: cleanEnv(options.env ?? {}), timeout: options.timeoutMs ?? 120_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface AgentProcess {
  child: ChildProcess;
  pid: number;
  /** Everything it printed so far, stdout and stderr interleaved. */
  output(): string;
  /** Its exit code, or 128 + the signal number when a signal ended it. */
  exited: Promise<number>;
}

/** Starts the real tuner-agent bin and leaves it running (`runAgent` waits for it to finish). */
export function startAgent(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): AgentProcess {
  const child = spawn(process.execPath, [AGENT_BIN, ...args], { cwd: options.cwd, env: cleanEnv(options.env ?? {}), stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number>((resolve) => {
    child.on('close', (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
  return { child, pid: child.pid!, output: () => text, exited };
}
