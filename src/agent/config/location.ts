// Where the agent's configuration file is. A file named on purpose (--config, else AGENT_CONFIG)
// must exist; otherwise the agent looks in its working directory, then in the system's place for
// a packaged agent (and the container image's mount point). Finding none is fine: the
// environment alone may configure the agent.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const CONFIG_FILE_NAME = 'agent.yaml';
/** The environment variable that names the file (not a configuration key: where the keys are). */
export const CONFIG_PATH_ENV = 'AGENT_CONFIG';
export const SYSTEM_CONFIG_FILE = '/etc/tuner-agent/agent.yaml';

export interface ConfigLocation {
  /** The file to read; null when none was named and none was found. */
  file: string | null;
  /** Named on purpose (then it must exist), or found on the search path. */
  origin: '--config' | typeof CONFIG_PATH_ENV | 'search';
  /** The search path, in order. */
  searched: readonly string[];
}

export interface LocateOptions {
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /** --config PATH, relative to cwd. */
  flag?: string | undefined;
  /** The system-wide file; tests put it in a temporary directory. */
  systemFile?: string | undefined;
}

export function locateConfig({ cwd, env, flag, systemFile = SYSTEM_CONFIG_FILE }: LocateOptions): ConfigLocation {
  const searched = [join(cwd, CONFIG_FILE_NAME), systemFile];
  if (flag) return { file: resolve(cwd, flag), origin: '--config', searched };
  const named = env[CONFIG_PATH_ENV];
  if (named) return { file: resolve(cwd, named), origin: CONFIG_PATH_ENV, searched };
  return { file: searched.find((path) => existsSync(path)) ?? null, origin: 'search', searched };
}

/** `--config /x: no such file`, naming where the path came from. */
export function missingNamedFile(location: ConfigLocation): string {
  const named = location.origin === '--config' ? `--config ${location.file!}` : `${CONFIG_PATH_ENV}=${location.file!}`;
  return `${named}: no such file; give the path of an existing agent.yaml, or name none and the agent looks for ${location.searched.join(', then ')}`;
}

/** Which file was read, and how many variables were set, for --check and the log. */
export function describeSource(location: ConfigLocation, variables: number): string {
  const env = `${variables} environment variable${variables === 1 ? '' : 's'}`;
  if (location.file === null) return `no file (none of ${location.searched.join(', ')} exists): the environment only, ${env}`;
  const how =
    location.origin === 'search'
      ? location.file === location.searched[0]
        ? 'the working directory'
        : `the system's, no ${CONFIG_FILE_NAME} in the working directory`
      : location.origin;
  return `${location.file} (${how})${variables > 0 ? `, and ${env}, which win over the file key by key` : ''}`;
}
