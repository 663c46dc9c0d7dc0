import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { takePort } from '../src/lab/ports.ts';

const root = join(import.meta.dirname, '..');

/** Runs `count` processes at once, each taking `each` ports and holding them until all are done. */
async function portsFromProcesses(count: number, each: number): Promise<number[][]> {
  const script = `
    import { freePort } from ${JSON.stringify(join(root, 'src/lab/ports.ts'))};
    const ports = [];
    for (let i = 0; i < ${each}; i++) ports.push(await freePort());
    process.stdout.write(JSON.stringify(ports) + '\\n');
    // Hold the ports until the parent has heard from everyone.
    process.stdin.once('data', () => process.exit(0));
  `;
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const lists = await Promise.all(
    children.map(
      (child) =>
        new Promise<number[]>((resolve, reject) => {
          let out = '';
          child.stdout.on('data', (chunk: Buffer) => {
            out += chunk.toString();
            if (out.includes('\n')) resolve(JSON.parse(out) as number[]);
          });
          child.once('exit', (code) => reject(new Error(`a port-taking process exited (${code}) before answering`)));
        }),
    ),
  );
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          child.once('exit', () => resolve());
          child.stdin.end('done\n');
        }),
    ),
  );
  return lists;
}

test('processes taking ports at once are never handed the same one, nor one from the kernel ephemeral range', async () => {
  const lists = await portsFromProcesses(4, 50);
  const all = lists.flat();
  assert.equal(all.length, 200);
  assert.equal(new Set(all).size, all.length, 'a port was handed to two processes');
  const ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  const inRange = all.filter((p) => p >= ephemeralLow);
  // An outgoing connection anywhere on the machine may take such a port between pick and bind.
  assert.deepEqual(inRange, [], `ports from the ephemeral range (from ${ephemeralLow}) were handed out`);
});

test('a port held by a live process is refused; once its holder is killed outright, it is taken over', async () => {
  const script = `
    import { freePort } from ${JSON.stringify(join(root, 'src/lab/ports.ts'))};
    process.stdout.write(String(await freePort()) + '\\n');
    setInterval(() => undefined, 1000);
  `;
  const holder = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) =>
    holder.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim()))),
  );
  assert.equal(await takePort(port), false, 'a port another live process holds was handed out');
  // SIGKILL: no exit handler runs, the lock file stays behind.
  await new Promise<void>((resolve) => {
    holder.once('exit', () => resolve());
    holder.kill('SIGKILL');
  });
  assert.equal(await takePort(port), true, 'the lock of a process that is gone still blocks its port');
});
