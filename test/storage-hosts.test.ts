// The storage's multi-host URL (src/service/storage/postgres-hosts.ts): split as libpq reads it,
// and the host chosen at connect time on the shared server: a host that does not answer is passed
// over, one that is not what target_session_attrs asks for too, and when none is, the error names
// each host's reason without the password. The failover itself: storage-failover.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { freePort } from '../src/lab/cluster.ts';
import { parseServiceArgs } from '../src/service/app/config.ts';
import { openPostgresDriver } from '../src/service/storage/postgres-driver.ts';
import { isHostLost, splitStorageHosts } from '../src/service/storage/postgres-hosts.ts';
import { createScratchDatabase } from './helpers/service.ts';

test('a multi-host URL is one URL per host, target_session_attrs apart', () => {
  const hosts = splitStorageHosts(
    'postgresql://tuner:p%40ss@db-a:5433,db-b,[::1]:5434/tuner?sslmode=require&target_session_attrs=read-write',
    'TUNER_DATABASE_URL',
  );
  assert.deepEqual(hosts.urls, [
    'postgresql://tuner:p%40ss@db-a:5433/tuner?sslmode=require',
    'postgresql://tuner:p%40ss@db-b/tuner?sslmode=require',
    'postgresql://tuner:p%40ss@[::1]:5434/tuner?sslmode=require',
  ]);
  assert.deepEqual(hosts.names, ['db-a:5433', 'db-b:5432', '[::1]:5434']);
  assert.equal(hosts.targetSessionAttrs, 'read-write');
  const one = splitStorageHosts('postgresql://tuner@db/tuner', 'TUNER_DATABASE_URL');
  assert.deepEqual(one, { urls: ['postgresql://tuner@db/tuner'], names: ['db:5432'], targetSessionAttrs: 'any' });
  assert.throws(
    () => splitStorageHosts('postgresql://tuner@a,b/tuner?target_session_attrs=standby', 'TUNER_DATABASE_URL'),
    /TUNER_DATABASE_URL: target_session_attrs=standby is not supported: the service writes to its storage; use read-write/,
  );
  assert.throws(() => splitStorageHosts('postgresql://tuner@a,,b/tuner', 'TUNER_DATABASE_URL'), /TUNER_DATABASE_URL: an empty host/);
});

test('the first host that answers and takes writes is chosen; none is an error naming each', async () => {
  const scratch = await createScratchDatabase('tuner_hosts');
  const dead = await freePort();
  try {
    const url = new URL(scratch.url);
    const multi = (attrs: string) =>
      `postgresql://postgres:not-shown-7f3a@127.0.0.1:${dead},${url.host}${url.pathname}?target_session_attrs=${attrs}`;
    const driver = await openPostgresDriver({ url: multi('read-write'), poolSize: 1 });
    try {
      const [row] = await driver.query<{ port: number; jit: string }>("SELECT inet_server_port() AS port, current_setting('jit') AS jit");
      assert.equal(row!.port, Number(url.port || 5432));
      // The service's connections compile nothing (postgres-driver.ts).
      assert.equal(row!.jit, 'off');
      await driver.query('CREATE TABLE t (x int)');
    } finally {
      await driver.close();
    }

    // A database that takes no writes is no read-write host: with both hosts so, none is chosen.
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    await admin.query(`ALTER DATABASE ${url.pathname.slice(1)} SET default_transaction_read_only = on`);
    await admin.end();
    await assert.rejects(openPostgresDriver({ url: multi('read-write') }), (err: Error) => {
      assert.match(err.message, /^cannot connect to TUNER_DATABASE_URL: no host is read-write: /);
      assert.match(err.message, new RegExp(`: 127\\.0\\.0\\.1:${dead}: nothing accepts connections at 127\\.0\\.0\\.1:${dead}; fix: `));
      assert.match(err.message, /: read-only \(default_transaction_read_only\), not read-write$/);
      assert.doesNotMatch(err.message, /not-shown-7f3a/);
      return true;
    });
    // any: the first that answers, read-only or not.
    const anyDriver = await openPostgresDriver({ url: multi('any') });
    await anyDriver.close();
  } finally {
    await scratch.drop();
  }
});

test('TUNER_DATABASE_URL takes several hosts, and refuses a target_session_attrs the service cannot use', () => {
  const run = parseServiceArgs([], { TUNER_DATABASE_URL: 'postgresql://tuner@a:5432,b:5432/tuner?target_session_attrs=read-write' });
  assert.equal(run.kind, 'run');
  assert.throws(
    () => parseServiceArgs([], { TUNER_DATABASE_URL: 'postgresql://tuner@a:5432,b:5432/tuner?target_session_attrs=read-only' }),
    /TUNER_DATABASE_URL: target_session_attrs=read-only is not supported: the service writes to its storage; use read-write/,
  );
});

test('what counts as a lost host: the connection gone or refused, the server shutting down, or no longer taking writes; not a busy pool', () => {
  const lost = [
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    new Error('Connection terminated unexpectedly'),
    Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
    Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
    Object.assign(new Error('cannot execute INSERT in a read-only transaction'), { code: '25006' }),
    Object.assign(new Error('connection failure'), { code: '08006' }),
  ];
  for (const err of lost) assert.equal(isHostLost(err), true, err.message);
  const notLost = [
    new Error('timeout exceeded when trying to connect'),
    Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' }),
    Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }),
  ];
  for (const err of notLost) assert.equal(isHostLost(err), false, err.message);
});
