// Loopback ports for the servers that tests, benchmarks and the demo start.
//
// A port the kernel hands out for listen(0) comes from its ephemeral range, the same range every
// outgoing connection takes its local port from; with tests running in parallel, such a port was
// sometimes taken (by a client socket, or by another test's listen(0)) in the seconds between
// being picked and being bound by a server we start: a Patroni member's PostgreSQL then failed
// with "could not bind … Address already in use". So ports come from below the ephemeral range,
// where nothing is handed out implicitly, and a lock file per port keeps two processes of ours
// from being handed the same one while the first still owns it.
import { createServer } from 'node:net';
import { chmodSync, mkdirSync, openSync, closeSync, readFileSync, unlinkSync, writeSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Lowest port handed out: above the well-known and most registered services' ports. */
const LOWEST = 20_000;
const FALLBACK_EPHEMERAL_LOW = 32_768;
const RESERVATIONS = join(tmpdir(), 'tuner-ports');

const held = new Set<string>();
let releaseOnExit = false;

/** A port on 127.0.0.1 that nothing listens on and that no other process of ours holds. */
export async function freePort(): Promise<number> {
  const highest = ephemeralLow() - 1;
  if (highest - LOWEST < 1_000) return kernelPort();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (highest - LOWEST + 1));
    if (await takePort(port)) return port;
  }
  return kernelPort();
}

/** Takes this port for this process when nothing listens on it and no live process of ours holds it. */
export async function takePort(port: number): Promise<boolean> {
  makeReservationsDir();
  if (!reserve(port)) return false;
  if (await canListen(port)) return true;
  release(port);
  return false;
}

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : FALLBACK_EPHEMERAL_LOW;
  } catch {
    // Not Linux: the IANA dynamic range starts at 49152; staying under 32768 keeps clear of both.
    return FALLBACK_EPHEMERAL_LOW;
  }
}

/** Shared by every user's test runs, as /tmp is (the umask would take the others' write bit). */
function makeReservationsDir(): void {
  if (existsSync(RESERVATIONS)) return;
  mkdirSync(RESERVATIONS, { recursive: true });
  try {
    chmodSync(RESERVATIONS, 0o1777);
  } catch {
    // Made by another user a moment ago: theirs to open up.
  }
}

/** Takes the port's lock file; a lock left by a process that is gone is taken over. */
function reserve(port: number): boolean {
  const file = join(RESERVATIONS, String(port));
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fd = openSync(file, 'wx', 0o666);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      held.add(file);
      if (!releaseOnExit) {
        releaseOnExit = true;
        process.on('exit', () => {
          for (const f of held) unlinkQuietly(f);
        });
      }
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') return false;
      if (ownerAlive(file)) return false;
      unlinkQuietly(file);
    }
  }
  return false;
}

function release(port: number): void {
  const file = join(RESERVATIONS, String(port));
  held.delete(file);
  unlinkQuietly(file);
}

function ownerAlive(file: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(file, 'utf8'));
  } catch {
    // Being written this instant by its owner.
    return existsSync(file);
  }
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not get a free port'));
      });
    });
  });
}
