// Starts the real OpenID provider (test/fixtures/oidc-provider-process.ts, the oidc-provider
// package) as a process of its own on loopback, with one client registered for a tuning service
// at `serviceUrl`, and waits until it prints its issuer URL.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export interface OidcProvider {
  issuer: string;
  /** What the provider wrote on stderr (its warnings about development settings). */
  stderr: string[];
  close(): Promise<void>;
}

const SCRIPT = join(import.meta.dirname, '..', 'fixtures', 'oidc-provider-process.ts');

export async function startOidcProvider(client: { id: string; secret: string; serviceUrl: string }): Promise<OidcProvider> {
  const child = spawn(process.execPath, [SCRIPT], {
    env: {
      ...process.env,
      OIDC_CLIENT_ID: client.id,
      OIDC_CLIENT_SECRET: client.secret,
      OIDC_REDIRECT_URI: `${client.serviceUrl}/login/sso/callback`,
      OIDC_POST_LOGOUT_URI: `${client.serviceUrl}/login`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr: string[] = [];
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => stderr.push(chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const issuer = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      if (line.startsWith('ISSUER ')) resolve(line.slice('ISSUER '.length));
    });
    child.once('exit', (code) => reject(new Error(`the OpenID provider exited (${String(code)}) before it listened: ${stderr.join('')}`)));
  });
  return {
    issuer,
    stderr,
    close: async () => {
      if (child.exitCode === null) child.kill();
      await exited;
    },
  };
}
