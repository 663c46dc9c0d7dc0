// Runs the real tuner-agent as a child process, the way an operator would: bin/tuner-agent.js
// under this Node, or, when TUNER_AGENT_BIN names one, the single-file binary (npm run
// build:agent; CI runs the agent tests against it), with no Node on its PATH.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants } from 'node:os';
import { delimiter, join, resolve } from 'node:path';

export const AGENT_BIN = join(import.meta.dirname, '..', '..', 'bin', 'tuner-agent.js');

/** The binary under test, if any. */
export const AGENT_BINARY: string | null = process.env['TUNER_AGENT_BIN'] ? resolve(process.env['TUNER_AGENT_BIN']) : null;

export interface AgentRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The file to execute and its arguments, for the agent under test. */
export function agentCommand(args: readonly string[], binary: string | null = AGENT_BINARY): [string, string[]] {
  return binary ? [binary, [...args]] : [process.execPath, [AGENT_BIN, ...args]];
}

/** The PATH without any directory that holds a `node`: a binary run with it proves it needs none. */
export function pathWithoutNode(path = process.env['PATH'] ?? ''): string {
  return path
    .split(delimiter)
    .filter((dir) => dir !== '' && !existsSync(join(dir, 'node')))
    .join(delimiter);
}

/** The PATH the agent under test gets. */
export function agentPath(binary: string | null = AGENT_BINARY): string {
  return binary ? pathWithoutNode() : (process.env['PATH'] ?? '');
}

/** The test runner's own AGENT_* variables must not leak into the agent under test. */
function cleanEnv(extra: NodeJS.ProcessEnv, binary: string | null): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AGENT_') && !k.startsWith('CLOUDB_')));
  return { ...env, PATH: agentPath(binary), ...extra };
}

export function runAgent(
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; binary?: string | null },
): Promise<AgentRun> {
  const binary = options.binary === undefined ? AGENT_BINARY : options.binary;
  const [file, fileArgs] = agentCommand(args, binary);
  return new Promise((resolve) => {
    execFile(
      file,
      fileArgs,
      { cwd: options.cwd, env: cleanEnv(options.env ?? {}, binary), timeout: options.timeoutMs ?? 120_000 },
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
export function startAgent(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; binary?: string | null }): AgentProcess {
  const binary = options.binary === undefined ? AGENT_BINARY : options.binary;
  const [file, fileArgs] = agentCommand(args, binary);
  const child = spawn(file, fileArgs, { cwd: options.cwd, env: cleanEnv(options.env ?? {}, binary), stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number>((resolve) => {
    child.on('close', (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
  return { child, pid: child.pid!, output: () => text, exited };
}
