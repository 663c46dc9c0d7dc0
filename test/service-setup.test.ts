// The service's pieces that need no running server, and its start-up: the setup page's snippets
// (checked with the agent's own config loader), docs/protocol.md being current, configuration
// errors, HTML escaping, the first admin, and migrations run by two replicas at once.
import assert from 'node:assert/strict';
import pg from 'pg';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import YAML from 'yaml';
import { KEYS } from '../src/agent/config/keys.ts';
import { loadConfig } from '../src/agent/config/load.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { ConfigError, parseServiceArgs } from '../src/service/app/config.ts';
import { PROTOCOL_DOC_PATH, protocolDoc } from '../src/service/docs/protocol-doc.ts';
import { openPostgresDriver } from '../src/service/storage/postgres-driver.ts';
import { migrate, MIGRATIONS } from '../src/service/storage/migrations.ts';
import { installScript } from '../src/service/http/downloads.ts';
import { readDownloads } from '../src/service/setup/downloads.ts';
import { setupSnippets, shellQuote } from '../src/service/setup/snippets.ts';
import { agentConnectionContext } from '../src/agent/process/db-tls.ts';
import { planConnection } from '../src/postgres/connect.ts';
import { setupPage } from '../src/service/web/setup-page.ts';
import { html } from '../src/service/web/html.ts';
import {
  ADMIN_PASSWORD,
  AgentClient,
  createScratchDatabase,
  createServiceStore,
  PersonClient,
  startTestService,
} from './helpers/service.ts';
import { startRequest } from './helpers/service-reports.ts';
import { managedAConfig } from '../src/agent/targets/managed-a/config.ts';
import { managedBFlexConfig } from '../src/agent/targets/managed-b-flex/config.ts';
import type { AgentConfig } from '../src/agent/config/agent-config.ts';

const DATABASE_ID = '6f1c1a52-8a3e-4c1d-9d2a-0c5b7f0e9a11';
const API_KEY = 'tuner_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde';

/** What an operator types in place of each placeholder. */
const FILLED: Record<string, string> = {
  '<AGENT_USER_PASSWORD>': 'S3cret-pw',
  '<INSTANCE_ENDPOINT>': 'orders-db.abcdefgh1234.us-east-1.rds.amazonaws.com',
  '<CLUSTER_ENDPOINT>': 'orders.cluster-abcdefgh1234.us-east-1.rds.amazonaws.com',
  '<DBNAME>': 'app',
  '<ACCESS_KEY_ID>': 'AKIAEXAMPLE',
  '<SECRET_ACCESS_KEY>': 'secret/example',
  '<REGION>': 'us-east-1',
  '<DATABASE_IDENTIFIER>': 'orders-db',
  '<SUBSCRIPTION_ID>': '00000000-0000-0000-0000-000000000000',
  '<RESOURCE_GROUP_NAME>': 'rg-orders',
  '<SERVER_NAME>': 'orders-flex',
  '<CLIENT_ID>': 'client-id',
  '<CLIENT_SECRET>': 'client-secret',
  '<TENANT_ID>': 'tenant-id',
  '<INSTANCE_IP>': '10.20.0.5',
  '<PROJECT>': 'orders-project',
  '<INSTANCE>': 'orders-sql',
};

function fill(text: string): string {
  return text.replace(/<[A-Z_]+>/g, (placeholder) => FILLED[placeholder] ?? placeholder);
}

/** The `-e NAME=value` pairs of a docker command, unquoted as a shell would. */
function containerEnv(command: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const match of command.matchAll(/-e ([A-Z_]+)=('(?:[^']|'\\'')*'|\S+)/g)) {
    const raw = match[2]!;
    env[match[1]!] = raw.startsWith("'") ? raw.slice(1, -1).replaceAll(`'\\''`, "'") : raw;
  }
  return env;
}

/** A configuration without what only one of the two forms carries. */
function withoutContainerOnly(config: AgentConfig): AgentConfig {
  const { clientId: _id, clientSecret: _secret, tenantId: _tenant, ...flex } = managedBFlexConfig.of(config);
  return { ...config, targets: { ...config.targets, local: {}, managed_b_flex: flex } };
}

for (const target of TARGETS.kinds) {
  test(`setup snippets for --${target}: the spec's names, accepted by the agent's own config loader`, async () => {
    const snippets = setupSnippets({
      target,
      databaseId: DATABASE_ID,
      apiKey: API_KEY,
      serverUrl: 'https://tuner.example.com',
      agentImage: 'registry.example.com/tuner-agent:latest',
      installScriptUrl: 'https://tuner.example.com/install.sh',
    });
    const yaml = YAML.parse(snippets.agentYaml) as Record<string, Record<string, unknown>>;
    const known = new Map(KEYS.map((k) => [k.section ? `${k.section}.${k.key}` : k.key, k]));
    for (const [section, values] of Object.entries(yaml)) {
      for (const key of Object.keys(values))
        assert.ok(known.has(`${section}.${key}`), `agent.yaml key ${section}.${key} is one the agent knows`);
    }
    assert.equal(yaml['tuner']?.['api_key'], API_KEY);
    assert.equal(yaml['tuner']?.['database_id'], DATABASE_ID);
    assert.equal(yaml['tuner']?.['server_url'], 'https://tuner.example.com');
    // A list key is written as docs/patroni.md writes it: a YAML list, not one comma-separated string.
    if (target === 'patroni') assert.match(snippets.agentYaml, /^ {2}rest_api_urls: \[ https:\/\/pg1:8008, https:\/\/pg2:8008 \]$/m);

    const env = containerEnv(snippets.containerCommand);
    const knownEnv = new Set(KEYS.map((k) => k.env));
    for (const name of Object.keys(env)) assert.ok(knownEnv.has(name), `${name} is a variable the agent knows`);
    assert.equal(env['AGENT_TUNER_API_KEY'], API_KEY);
    assert.match(snippets.containerCommand, /^docker run -d --restart always /m);
    assert.ok(snippets.containerCommand.trimEnd().endsWith(`registry.example.com/tuner-agent:latest --${target}`));
    assert.match(snippets.binaryCommands, new RegExp(`^\\./tuner-agent --${target}$`, 'm'));
    // The spec's installer one-liner, with this service's address.
    assert.match(
      snippets.binaryCommands,
      /^curl -fsSL https:\/\/tuner\.example\.com\/install\.sh > \/tmp\/agent-installer\.sh && sh \/tmp\/agent-installer\.sh$/m,
    );
    // The journal and lease survive a container made anew: a named volume on the image's state path.
    assert.match(snippets.containerCommand, new RegExp(`-v tuner-agent-${DATABASE_ID}:/var/lib/tuner-agent `));
    assert.equal(
      snippets.databaseSql,
      "CREATE USER agent_user WITH PASSWORD '<AGENT_USER_PASSWORD>';\nGRANT pg_monitor TO agent_user;\nCREATE EXTENSION IF NOT EXISTS pg_stat_statements;\n",
    );

    // The agent itself accepts both forms once the placeholders are filled in.
    const dir = mkdtempSync(join(tmpdir(), 'tuner-setup-'));
    const empty = mkdtempSync(join(tmpdir(), 'tuner-setup-env-'));
    try {
      writeFileSync(join(dir, 'agent.yaml'), fill(snippets.agentYaml));
      const fromFile = loadConfig({ cwd: dir, env: {}, target, needsService: true });
      assert.deepEqual(fromFile.warnings, []);
      // The URL names the database as its certificate does, and verifies it on the clouds.
      const url = fromFile.config.postgresql.connectionUrl;
      assert.doesNotMatch(url, /<[A-Z_]+>/, 'every placeholder of the URL is explained');
      assert.equal(
        planConnection(url, await agentConnectionContext(target)).sslmode,
        ['local', 'patroni'].includes(target) ? 'prefer' : target === 'managed-c' ? 'verify-ca' : 'verify-full',
      );
      const filledEnv = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, fill(v)]));
      const fromEnv = loadConfig({ cwd: empty, env: filledEnv, target, needsService: true });
      assert.deepEqual(fromEnv.warnings, []);
      // The container form adds what only a container needs: the service principal of Cloud B;
      // the file form adds the local restart command, which has no use in a container.
      assert.deepEqual(withoutContainerOnly(fromEnv.config), withoutContainerOnly(fromFile.config));
      if (target === 'managed-b-flex') assert.equal(managedBFlexConfig.of(fromEnv.config).tenantId, 'tenant-id');

      // Cloud A's ECS task: the same variables less the access keys (the task role signs).
      if (target === 'managed-a' || target === 'managed-a-cluster') {
        type TaskDefinition = {
          taskRoleArn: string;
          containerDefinitions: {
            image: string;
            command: string[];
            environment: { name: string; value: string }[];
            mountPoints: { containerPath: string }[];
          }[];
        };
        const task = JSON.parse(snippets.ecsTaskDefinition!) as TaskDefinition;
        const container = task.containerDefinitions[0]!;
        assert.equal(container.image, 'registry.example.com/tuner-agent:latest');
        assert.deepEqual(container.command, [`--${target}`]);
        assert.match(task.taskRoleArn, /^arn:aws:iam::<ACCOUNT_ID>:role\//);
        assert.deepEqual(
          container.mountPoints.map((m) => m.containerPath),
          ['/var/lib/tuner-agent'],
        );
        const taskEnv = Object.fromEntries(container.environment.map((e) => [e.name, fill(e.value)]));
        for (const name of Object.keys(taskEnv)) assert.ok(knownEnv.has(name), `${name} is a variable the agent knows`);
        assert.equal(taskEnv['AGENT_CLOUDA_ACCESS_KEY_ID'], undefined);
        const fromTask = loadConfig({ cwd: empty, env: taskEnv, target, needsService: true });
        assert.equal(managedAConfig.of(fromTask.config).accessKeyId, undefined);
        assert.equal(managedAConfig.of(fromTask.config).region, 'us-east-1');
      } else {
        assert.equal(snippets.ecsTaskDefinition, null);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(empty, { recursive: true, force: true });
    }

    // Elsewhere than on the page that created it, the key is a placeholder.
    const later = setupSnippets({
      target,
      databaseId: DATABASE_ID,
      apiKey: null,
      serverUrl: 'https://tuner.example.com',
      agentImage: '<AGENT_IMAGE>',
      installScriptUrl: 'https://tuner.example.com/install.sh',
    });
    assert.ok(!later.agentYaml.includes('tuner_'));
    assert.match(later.agentYaml, /api_key: <API_KEY>/);
  });
}

test('downloads: only the binaries SHA256SUMS names and that are there; with none, the setup page says so', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-downloads-'));
  try {
    const pageWith = (binaryTargets: readonly string[]) =>
      setupPage({
        login: {
          user: {
            id: 'u',
            organizationId: 'a',
            username: 'admin',
            role: 'admin',
            createdAt: new Date(),
            via: 'password',
            address: null,
            token: null,
          },
          csrfToken: 'c',
          expiresAt: new Date(),
        },
        database: {
          id: DATABASE_ID,
          organizationId: 'a',
          name: 'orders',
          target: 'local',
          reportIntervalSeconds: null,
          createdAt: new Date(),
          agent: null,
        },
        keys: [],
        newKey: null,
        serverUrl: 'https://tuner.example.com',
        agentImage: '<REGISTRY>/tuner-agent:latest',
        installScriptUrl: 'https://tuner.example.com/install.sh',
        binaryTargets,
      }).value;
    assert.deepEqual(readDownloads(dir), { binaries: [], missing: 'no SHA256SUMS in the downloads directory' });
    const none = pageWith([]);
    assert.match(none, /id="no-binaries"/);
    assert.match(none, /This tuning service has no tuner-agent binaries to install/);
    assert.ok(!none.includes('install.sh'), 'no one-liner that would fail');

    const sum = 'ab'.repeat(32);
    writeFileSync(join(dir, 'SHA256SUMS'), `${sum}  tuner-agent-linux-x64\n${sum}  tuner-agent-linux-arm64\n${sum}  ../etc/passwd\n`);
    writeFileSync(join(dir, 'tuner-agent-linux-x64'), 'x');
    writeFileSync(join(dir, 'notes.txt'), 'not served');
    assert.deepEqual(readDownloads(dir), {
      binaries: [{ file: 'tuner-agent-linux-x64', target: 'linux-x64', sha256: sum }],
      missing: null,
    });
    const some = pageWith(['linux-x64']);
    assert.ok(!some.includes('no-binaries'));
    assert.match(
      some,
      /curl -fsSL https:\/\/tuner\.example\.com\/install\.sh &gt; \/tmp\/agent-installer\.sh &amp;&amp; sh \/tmp\/agent-installer\.sh/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('install.sh carries the service address only when it is safe in a shell script', () => {
  assert.match(installScript('https://tuner.example.com')!, /^SERVICE_URL='https:\/\/tuner\.example\.com'$/m);
  assert.match(installScript('http://[::1]:8080/')!, /^SERVICE_URL='http:\/\/\[::1\]:8080'$/m);
  for (const unsafe of ["http://x';rm -rf ~;'", 'http://a b', 'http://x$(id)', 'file:///etc'])
    assert.equal(installScript(unsafe), null, unsafe);
});

test('shell quoting survives quotes', () => {
  assert.equal(shellQuote('plain-value_1.2'), 'plain-value_1.2');
  assert.equal(shellQuote("it's <x>"), `'it'\\''s <x>'`);
});

test('docs/protocol.md is generated from the schemas and current', () => {
  assert.equal(
    readFileSync(PROTOCOL_DOC_PATH, 'utf8'),
    protocolDoc(),
    'docs/protocol.md is stale: run node src/service/docs/protocol-doc.ts --write',
  );
});

test('HTML escapes everything it is given', () => {
  const name = `<script>alert("x")</script> & 'quotes'`;
  assert.equal(
    html`<p title="${name}">${name}</p>`.value,
    '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quotes&#39;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quotes&#39;</p>',
  );
  assert.equal(html`<ul>${['a<', 'b'].map((x) => html`<li>${x}</li>`)}</ul>`.value, '<ul><li>a&lt;</li><li>b</li></ul>');
  assert.throws(() => html`${{ toString: () => '<b>' }}`, TypeError);
});

test('configuration: flags win over variables, errors name the setting and never show secrets', () => {
  const run = parseServiceArgs(['--listen', '0.0.0.0:9000'], { TUNER_LISTEN: '127.0.0.1:1', TUNER_DATA_DIR: '/var/lib/tuner' });
  assert.equal(run.kind, 'run');
  if (run.kind === 'run') {
    assert.equal(run.config.host, '0.0.0.0');
    assert.equal(run.config.port, 9000);
    assert.equal(run.config.dataDir, '/var/lib/tuner');
    assert.equal(run.config.reportIntervalSeconds, 60);
    assert.equal(run.config.databaseUrl, undefined);
  }
  const secret = 'hunter2-very-secret';
  try {
    parseServiceArgs(['--listen', 'nowhere'], {
      TUNER_DATABASE_URL: `mysql://u:${secret}@h/db`,
      TUNER_REPORT_INTERVAL_SECONDS: '0',
      TUNER_ADMIN_PASSWORD: 'short',
    });
    assert.fail('expected a ConfigError');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    assert.match(err.message, /--listen: expected HOST:PORT/);
    assert.match(err.message, /TUNER_DATABASE_URL: expected a URL postgresql:/);
    assert.match(err.message, /TUNER_REPORT_INTERVAL_SECONDS: expected at least 1/);
    assert.match(err.message, /TUNER_ADMIN_PASSWORD: expected at least 12 characters/);
    assert.ok(!err.message.includes(secret) && !err.message.includes('short'), err.message);
  }
  assert.throws(() => parseServiceArgs(['--bogus'], {}), ConfigError);
});

test('the first start prints the admin login once; a restart does not make another', async () => {
  const store = await createServiceStore('postgres');
  try {
    const first = await startTestService(store, { TUNER_ADMIN_PASSWORD: '' });
    const announced = first.announced.join('');
    const password = /password: (\S+)/.exec(announced)?.[1];
    assert.ok(password, announced);
    await first.close();
    const second = await startTestService(store, { TUNER_ADMIN_PASSWORD: '' });
    assert.deepEqual(second.announced, []);
    const admin = await PersonClient.login(second.url, 'admin', password);
    assert.equal((await admin.get<{ user: { isAdmin: boolean } }>('/api/manage/session')).body.user.isAdmin, true);
    await second.close();
  } finally {
    await store.dispose();
  }
});

test('two replicas migrating one PostgreSQL at once apply each migration once', async () => {
  const scratch = await createScratchDatabase();
  try {
    const drivers = await Promise.all([0, 1, 2].map(() => openPostgresDriver({ url: scratch.url, poolSize: 2 })));
    const applied = await Promise.all(drivers.map((d) => migrate(d)));
    assert.deepEqual(applied.flat().sort(), MIGRATIONS.map((m) => m.version).sort());
    const rows = await drivers[0]!.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    assert.deepEqual(
      rows.map((r) => r.version),
      MIGRATIONS.map((m) => m.version),
    );
    assert.deepEqual(await migrate(drivers[1]!), [], 'nothing left to apply');
    await Promise.all(drivers.map((d) => d.close()));
  } finally {
    await scratch.drop();
  }
});

test('secrets never reach the log, even at trace level', async () => {
  const store = await createServiceStore('postgres');
  const service = await startTestService(store, { TUNER_LOG_LEVEL: 'trace' });
  try {
    const admin = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
    await PersonClient.login(service.url, 'admin', 'a-wrong-password-123').catch(() => undefined);
    const { databaseId, apiKey, apiKeyId } = await admin.createDatabase('logged');
    const agent = new AgentClient(service.url, databaseId, apiKey);
    const start = await agent.start(startRequest(), { gzip: true });
    assert.equal(start.status, 200);
    await agent.start(startRequest({ hostname: 'second' }));
    await agent.report({ leaseId: 'x', seq: 'bad' });
    await new AgentClient(service.url, databaseId, `${apiKey}x`).report({});
    await admin.post(`/api/manage/databases/${databaseId}/keys/${apiKeyId}/revoke`);
    await agent.report({});
    // People and API tokens: a password given, one generated, a token made, used, and revoked.
    const given = await admin.post<{ password: null }>('/api/manage/users', {
      username: 'dba',
      password: 'a-given-password-456',
      role: 'viewer',
    });
    const generated = await admin.post<{ password: string }>('/api/manage/users', { username: 'ops', role: 'operator' });
    const made = await admin.post<{ token: { id: string }; secret: string }>('/api/manage/tokens', {
      name: 'ci',
      role: 'viewer',
      expiresInDays: 1,
    });
    const bearer = (secret: string) => fetch(`${service.url}/api/manage/databases`, { headers: { authorization: `Bearer ${secret}` } });
    assert.equal((await bearer(made.body.secret)).status, 200);
    await admin.post(`/api/manage/tokens/${made.body.token.id}/revoke`);
    assert.equal((await bearer(made.body.secret)).status, 401);
    assert.equal(given.status, 201);
    const sessionToken = admin.cookie.split('=')[1]!;
    const logs = service.logs.join('');
    assert.ok(logs.includes('agent started'), 'the log is written');
    const secrets = [
      ADMIN_PASSWORD,
      'a-wrong-password-123',
      'a-given-password-456',
      generated.body.password,
      made.body.secret,
      made.body.secret.slice(9),
    ];
    secrets.push(apiKey, apiKey.slice(6), sessionToken, admin.csrfToken);
    for (const secret of secrets) assert.ok(!logs.includes(secret), `a secret in the log: ${secret.slice(0, 4)}…`);
    assert.ok(!/authorization|cookie/i.test(logs), 'no headers in the log');
    // Nor in the audit log, which records all of the above: its rows, as stored.
    const storage = new pg.Client({ connectionString: store.databaseUrl });
    await storage.connect();
    try {
      const audit = (await storage.query<{ row: string }>('SELECT row_to_json(a)::text AS row FROM audit_events a')).rows.map((r) => r.row);
      assert.ok(audit.length >= 8, `the audit log is written (${audit.length})`);
      for (const secret of secrets) assert.ok(!audit.join('\n').includes(secret), `a secret in the audit log: ${secret.slice(0, 4)}…`);
    } finally {
      await storage.end();
    }
  } finally {
    await service.close();
    await store.dispose();
  }
});

test('--tls-cert and --tls-key: both or neither, readable, PEM, and belonging together; errors name the flag', async () => {
  const { makeTestCa } = await import('../src/lab/tls.ts');
  const ca = makeTestCa('service tls config test CA');
  try {
    const a = ca.issue(['127.0.0.1']);
    const b = ca.issue(['localhost']);
    const ok = parseServiceArgs(['--tls-cert', a.certFile, '--tls-key', a.keyFile], {});
    assert.equal(ok.kind === 'run' && ok.config.tls?.certFile, a.certFile);
    const refused = (argv: string[]) => {
      try {
        parseServiceArgs(argv, {});
      } catch (err) {
        assert.ok(err instanceof ConfigError);
        return err.message;
      }
      assert.fail(`accepted ${argv.join(' ')}`);
    };
    assert.match(refused(['--tls-cert', a.certFile]), /--tls-key \(TUNER_TLS_KEY\) is missing: HTTPS needs both/);
    assert.match(
      refused(['--tls-cert', '/nonexistent.pem', '--tls-key', a.keyFile]),
      /--tls-cert: cannot read \/nonexistent\.pem \(ENOENT\)/,
    );
    assert.match(
      refused(['--tls-cert', a.certFile, '--tls-key', b.keyFile]),
      new RegExp(`--tls-cert ${a.certFile} / --tls-key ${b.keyFile}: .*key values mismatch`),
    );
    const mismatch = refused(['--tls-cert', a.certFile, '--tls-key', b.keyFile]);
    assert.ok(!mismatch.includes('PRIVATE KEY'), 'the key itself is never shown');
  } finally {
    ca.remove();
  }
});
