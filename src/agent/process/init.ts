// `tuner-agent init DIR --TARGET`: one directory per database instance, as the spec has it for
// several instances on one host, each with its own copy of the binary and its own agent.yaml to
// fill in. The journal and the lease then stay apart too: each agent keeps them in its directory.
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { isSea } from 'node:sea';
import type { TargetKind } from '../../knobs/index.ts';
import { agentYamlTemplate } from '../config/template.ts';
import { CONFIG_FILE_NAME } from '../config/load.ts';

export const BINARY_NAME = 'tuner-agent';

/** The binary's file name on `platform`: Windows runs only what ends in .exe. */
export const binaryFileName = (platform: NodeJS.Platform): string => (platform === 'win32' ? `${BINARY_NAME}.exe` : BINARY_NAME);

export class InitError extends Error {
  override name = 'InitError';
}

export interface InitOutcome {
  dir: string;
  /** False when this agent runs under Node (npx), which has no single file to copy. */
  copiedBinary: boolean;
  text: string;
}

export function initInstance(
  dirArg: string,
  target: TargetKind,
  cwd: string,
  executable = process.execPath,
  singleFile = isSea(),
  platform = process.platform,
): InitOutcome {
  const binary = binaryFileName(platform);
  const dir = resolve(cwd, dirArg);
  if (existsSync(dir)) {
    const present = readdirSync(dir);
    if (present.length > 0) {
      throw new InitError(
        `${dir} is not empty (it holds ${present.slice(0, 3).join(', ')}${present.length > 3 ? ', …' : ''}); give each instance a new directory`,
      );
    }
  }
  mkdirSync(dir, { recursive: true });
  if (singleFile) {
    copyFileSync(executable, resolve(dir, binary));
    chmodSync(resolve(dir, binary), 0o755);
  }
  // Owner-only: it is where the API key and the database password go.
  writeFileSync(resolve(dir, CONFIG_FILE_NAME), agentYamlTemplate(target), { mode: 0o600, flag: 'wx' });

  const run = singleFile ? (platform === 'win32' ? `.\\${binary}` : `./${binary}`) : 'npx tuner-agent';
  const text = [
    `made ${dir}: ${singleFile ? `${binary} and ` : ''}${CONFIG_FILE_NAME}`,
    ...(singleFile
      ? []
      : [
          `(this tuner-agent runs under Node, so there is no single file to copy: run "npx tuner-agent" from the project in ${dir}, or install the binary there)`,
        ]),
    'Next:',
    `  1. fill in ${dir}/${CONFIG_FILE_NAME} for this database (its API key and database id from the setup page)`,
    `  2. cd ${dir} && ${run} --${target} --check`,
    `  3. cd ${dir} && ${run} --${target}   (one agent per directory, e.g. each in its own terminal multiplexer window)`,
    '',
  ].join('\n');
  return { dir, copiedBinary: singleFile, text };
}
