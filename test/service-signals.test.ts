// tuner-service stopped by a signal, as systemd (SIGTERM), Ctrl+C (SIGINT) or a closed terminal
// (SIGHUP) stops it: the real bin says so, closes its listener and its storage, and exits 0, rather
// than be ended by the signal with the storage open.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { freePort } from '../src/lab/cluster.ts';
import { ADMIN_PASSWORD, createServiceStore, type ServiceStore } from './helpers/service.ts';
import { until } from './helpers/until.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'tuner-service.js');

let store: ServiceStore;
before(async () => {
  store = await createServiceStore('pglite');
});
after(async () => {
  await store?.dispose();
});

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
  test(`${signal}: the service stops cleanly and exits 0`, { timeout: 120_000 }, async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [BIN, '--listen', `127.0.0.1:${port}`, '--data-dir', store.dataDir], {
      env: { ...process.env, TUNER_ADMIN_PASSWORD: ADMIN_PASSWORD, TUNER_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, by) => resolve({ code, signal: by })),
    );
    try {
      await until('the service to listen', () => Promise.resolve(/listening on /.test(out) || child.exitCode !== null), 60_000, 100);
      assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200, out);
      child.kill(signal);
      assert.deepEqual(await exited, { code: 0, signal: null }, out);
      assert.match(out, new RegExp(`^tuner-service: ${signal}, stopping$`, 'm'));
      await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'nothing listens any more');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
}
