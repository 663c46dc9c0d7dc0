// A real egress proxy for the tests: Debian's tinyproxy on a free loopback port, with its own
// configuration and log in a temporary directory, optionally asking for basic authentication.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../src/lab/cluster.ts';
import { until } from './until.ts';

export const TINYPROXY = '/usr/bin/tinyproxy';
export const skipWithoutTinyproxy: string | false =
  existsSync(TINYPROXY) || process.env['CI'] === 'true'
    ? false
    : `tinyproxy is not installed at ${TINYPROXY} (apt-get install -y tinyproxy)`;

export interface TestProxy {
  /** http://[user:password@]127.0.0.1:port */
  readonly url: string;
  /** The host:port of every CONNECT the proxy was asked for, in order. */
  connects(): string[];
  stop(): Promise<void>;
}

export async function startProxy(auth?: { user: string; password: string }): Promise<TestProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-proxy-'));
  // tinyproxy drops root for nobody, which must be able to write its log.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const log = join(dir, 'tinyproxy.log');
  const conf = [
    `Port ${port}`,
    'Listen 127.0.0.1',
    'Timeout 60',
    `LogFile "${log}"`,
    'LogLevel Info',
    'MaxClients 50',
    'Allow 127.0.0.1',
    ...(auth ? [`BasicAuth ${auth.user} ${auth.password}`] : []),
  ];
  writeFileSync(join(dir, 'tinyproxy.conf'), `${conf.join('\n')}\n`);
  const child: ChildProcess = spawn(TINYPROXY, ['-d', '-c', join(dir, 'tinyproxy.conf')], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const read = () => (existsSync(log) ? readFileSync(log, 'utf8') : '');
  await until(
    'tinyproxy to listen',
    async () => /Listening on|listening on|Starting main loop/i.test(read()) || (await canConnect(port)),
    10_000,
  );
  return {
    url: `http://${auth ? `${auth.user}:${auth.password}@` : ''}127.0.0.1:${port}`,
    connects: () => [...read().matchAll(/Request \(file descriptor \d+\): CONNECT (\S+) HTTP/g)].map((m) => m[1]!),
    async stop() {
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function canConnect(port: number): Promise<boolean> {
  const { connect } = await import('node:net');
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.end();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
