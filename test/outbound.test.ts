// The agent's outbound traffic as enterprise hosts allow it: through a real egress proxy
// (Debian's tinyproxy, with a password) to the tuning service over HTTPS and to both clouds'
// fakes, NO_PROXY honoured, instance metadata never proxied, a private CA from tuner.ca_file, and
// the proxy's password nowhere in what the agent prints.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Agent, fetch } from 'undici';
import { OutboundError, configureOutbound, routeChecks } from '../src/agent/sending/outbound.ts';
import { freePort, type Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster } from './helpers/agent-cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { keysTravelInClear } from '../src/service/web/setup-page.ts';
import { startFakeAws, type FakeAws } from './fakes/aws/index.ts';
import { startFakeAzure, type FakeAzure } from './fakes/azure/index.ts';
import { runAgent, startAgent, type AgentProcess } from './helpers/agent-process.ts';
import { skipWithoutTinyproxy, startProxy, type TestProxy } from './helpers/proxy.ts';
import {
  ADMIN_PASSWORD,
  PersonClient,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type TestService,
} from './helpers/service.ts';
import { until } from './helpers/until.ts';

const PROXY_AUTH = { user: 'tuner', password: 'proxy-Pa55-e7c1' };

const PROXY_VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'ALL_PROXY', 'all_proxy', 'NO_PROXY', 'no_proxy'];

/** Runs `body` with only `env`'s proxy variables set in this process, then puts them back: the
 * agents the other tests start must not inherit them. */
function withProxyEnv(env: Record<string, string>, body: () => void): void {
  const saved = Object.fromEntries(PROXY_VARIABLES.map((n) => [n, process.env[n]]));
  for (const name of PROXY_VARIABLES) delete process.env[name];
  Object.assign(process.env, env);
  try {
    body();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

describe('routes, decided per URL', () => {
  test('the proxy from the environment, NO_PROXY honoured, metadata never proxied, the password masked', () => {
    const proxy = `http://u:${PROXY_AUTH.password}@proxy.internal:3128`;
    withProxyEnv({ HTTPS_PROXY: proxy, NO_PROXY: '.corp.example' }, () => {
      const outbound = configureOutbound({});
      assert.equal(outbound.proxyFor('https://rds.us-east-1.amazonaws.com/'), proxy);
      assert.equal(outbound.proxyFor('https://tuner.corp.example/api'), undefined);
      for (const metadata of [
        'http://169.254.169.254/latest/api/token',
        'http://169.254.170.2/v2/credentials/x',
        'http://[fd00:ec2::254]/latest/meta-data/',
      ]) {
        assert.equal(outbound.proxyFor(metadata), undefined, metadata);
      }
      const described = outbound.describe('https://management.azure.com/');
      assert.match(described, /through the proxy http:\/\/u:\*+@proxy\.internal:3128/);
      assert.ok(!described.includes(PROXY_AUTH.password));
      const lines = routeChecks(outbound, [{ name: 'instance metadata', url: 'http://169.254.169.254/' }]);
      assert.deepEqual(
        lines.map((l) => [l.ok, l.detail]),
        [[true, 'http://169.254.169.254/: directly (no proxy)']],
      );
    });
  });

  test('a proxy variable no URL parser reads is a configuration error naming it, its password masked', () => {
    for (const name of ['HTTPS_PROXY', 'http_proxy']) {
      withProxyEnv({ [name]: 'http://pu:Hp1/Jo2@Ki3@127.0.0.1:18499' }, () => {
        assert.throws(
          () => configureOutbound({}),
          (err: Error) =>
            err instanceof OutboundError &&
            err.message.startsWith(`${name} is not a valid proxy URL`) &&
            err.message.endsWith('http://pu:****@127.0.0.1:18499') &&
            !/Hp1|Jo2|Ki3/.test(err.message),
        );
      });
    }
  });

  test('tuner.proxy_url wins over the environment', () => {
    withProxyEnv({ HTTPS_PROXY: 'http://env.internal:3128' }, () => {
      const outbound = configureOutbound({ proxyUrl: 'http://explicit.internal:8080' });
      assert.equal(outbound.proxyFor('https://tuner.example.com/'), 'http://explicit.internal:8080');
    });
  });

  test('the setup page warns only when keys would cross a network in clear text', () => {
    assert.equal(keysTravelInClear('http://tuner.example.com'), true);
    assert.equal(keysTravelInClear('http://10.0.0.5:8080'), true);
    for (const url of ['https://tuner.example.com', 'http://127.0.0.1:8080', 'http://localhost:8080', 'http://[::1]:8080'])
      assert.equal(keysTravelInClear(url), false, url);
  });
});

describe('through a real proxy', { skip: skipWithoutTinyproxy }, () => {
  let ca: TestCa;
  let cluster: Cluster;
  let proxy: TestProxy;
  let store: ServiceStore;
  let service: TestService;
  const dirs: string[] = [];
  const transcript: string[] = [];
  const agents: AgentProcess[] = [];
  const start = (args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): AgentProcess => {
    const agent = startAgent(args, options);
    agents.push(agent);
    return agent;
  };

  before(async () => {
    ca = makeTestCa('tuner test private CA');
    cluster = await startAgentCluster({ tls: { ca } });
    proxy = await startProxy(PROXY_AUTH);
    store = await createServiceStore('pglite');
    const issued = ca.issue(['127.0.0.1', 'localhost']);
    service = await startTestService(
      store,
      { TUNER_TLS_CERT: issued.certFile, TUNER_TLS_KEY: issued.keyFile },
      `127.0.0.1:${await freePort()}`,
    );
  });
  after(async () => {
    for (const agent of agents) agent.child.kill('SIGKILL');
    await service?.close();
    await store?.dispose();
    await proxy?.stop();
    await cluster?.destroy();
    ca?.remove();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  function agentDir(lines: string[]): string {
    const dir = mkdtempSync(join(tmpdir(), 'tuner-outbound-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'agent.yaml'), `${lines.join('\n')}\n`);
    return dir;
  }

  test('the service serves HTTPS with HSTS and Secure cookies', async () => {
    assert.match(service.url, /^https:\/\//);
    const trusting = new Agent({ connect: { ca: ca.cert } });
    const response = await fetch(`${service.url}/login`, { dispatcher: trusting });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('strict-transport-security'), 'max-age=31536000');
    assert.match(response.headers.get('set-cookie') ?? '', /; Secure/);
    await trusting.close();
  });

  test(
    'reports reach the HTTPS service through the proxy with tuner.ca_file; NO_PROXY goes direct; without the CA the agent refuses the service',
    { timeout: 180_000 },
    async () => {
      const person = await loginTo(service.url, ca);
      const { databaseId, apiKey } = await person.createDatabase('behind-proxy', 'local');
      assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
      const base = [
        'postgresql:',
        `  connection_url: ${cluster.agentUrl}`,
        `  extra_ca_file: ${ca.certFile}`,
        'tuner:',
        `  server_url: ${service.url}`,
        `  api_key: ${apiKey}`,
        `  database_id: ${databaseId}`,
      ];
      const latestSeq = async () =>
        (await person.get<{ report: { seq: number } | null }>(`/api/manage/databases/${databaseId}/reports/latest`)).body.report?.seq ?? 0;

      const proxied = start(['--local'], { cwd: agentDir([...base, `  ca_file: ${ca.certFile}`]), env: { HTTPS_PROXY: proxy.url } });
      await until('a report through the proxy', async () => (await latestSeq()) >= 1, 60_000).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}; exit ${proxied.child.exitCode}; the agent printed:\n${proxied.output()}`);
      });
      proxied.child.kill('SIGTERM');
      await proxied.exited;
      transcript.push(proxied.output());
      const servicePort = new URL(service.url).port;
      assert.ok(proxy.connects().includes(`127.0.0.1:${servicePort}`), `CONNECTs: ${proxy.connects().join(', ')}`);
      assert.match(
        proxied.output(),
        new RegExp(
          `reached through the proxy http://tuner:\\*+@127\\.0\\.0\\.1:\\d+, trusting the CAs in ${ca.certFile.replaceAll('/', '\\/')}`,
        ),
      );

      const connectsBefore = proxy.connects().length;
      const seqBefore = await latestSeq();
      const direct = start(['--local'], {
        cwd: agentDir([...base, `  ca_file: ${ca.certFile}`]),
        env: { HTTPS_PROXY: proxy.url, NO_PROXY: '127.0.0.1' },
      });
      await until('a report sent directly', async () => (await latestSeq()) > seqBefore, 60_000);
      direct.child.kill('SIGTERM');
      await direct.exited;
      transcript.push(direct.output());
      assert.equal(proxy.connects().length, connectsBefore, 'NO_PROXY: nothing went through the proxy');

      const untrusting = start(['--local'], { cwd: agentDir(base), env: { HTTPS_PROXY: proxy.url } });
      await until(
        'the agent to refuse the certificate',
        () => Promise.resolve(/cannot be reached: .*(CERT|certificate|SELF_SIGNED|UNABLE_TO_VERIFY)/i.test(untrusting.output())),
        60_000,
      );
      untrusting.child.kill('SIGTERM');
      await untrusting.exited;
      transcript.push(untrusting.output());
    },
  );

  describe('the clouds through the proxy', () => {
    let aws: FakeAws;
    let azure: FakeAzure;
    before(async () => {
      aws = await startFakeAws({ postgres: cluster, https: ca });
      azure = await startFakeAzure({ cluster, fqdn: '127.0.0.1' });
    });
    after(async () => {
      await aws?.close();
      await azure?.close();
    });

    test("Cloud A's API calls go through the proxy, trusting its endpoint through tuner.ca_file", async () => {
      const dir = agentDir([
        'postgresql:',
        `  connection_url: ${cluster.agentUrl}`,
        `  extra_ca_file: ${ca.certFile}`,
        'managed_a:',
        '  REGION: us-east-1',
        '  DATABASE_IDENTIFIER: mydb',
        'tuner:',
        `  ca_file: ${ca.certFile}`,
      ]);
      const run = await runAgent(['--managed-a', '--check'], {
        cwd: dir,
        env: {
          AWS_ENDPOINT_URL: aws.url,
          AWS_EC2_METADATA_DISABLED: 'true',
          AGENT_CLOUDA_ACCESS_KEY_ID: 'AKIAFAKETUNER7Q2W',
          AGENT_CLOUDA_SECRET_ACCESS_KEY: 'fAkE/secret+Key9Zr1TuNeR0x5mQv2kLp8sWc3',
          HTTPS_PROXY: proxy.url,
        },
      });
      transcript.push(run.stdout, run.stderr);
      // The fake answered (it holds no instance here): the calls crossed the proxy, over TLS trusted through ca_file.
      assert.match(run.stdout, /Cloud A: DB instance found: Cloud A has no DB instance "mydb"/, run.stdout + run.stderr);
      assert.ok(aws.calls.length > 0);
      assert.ok(proxy.connects().includes(`127.0.0.1:${new URL(aws.url).port}`), `CONNECTs: ${proxy.connects().join(', ')}`);
      assert.match(run.stdout, /route to Cloud A's RDS API: https:\/\/127\.0\.0\.1:\d+: through the proxy http:\/\/tuner:\*+@/);
      assert.match(run.stdout, /route to instance metadata \(credentials\): http:\/\/169\.254\.169\.254\/: directly \(no proxy\)/);
    });

    test("Cloud B's Resource Manager and identity calls go through the proxy", async () => {
      const dir = agentDir([
        'postgresql:',
        `  connection_url: ${cluster.agentUrl}`,
        'managed_b_flex:',
        `  subscription_id: ${azure.subscriptionId}`,
        `  resource_group_name: ${azure.resourceGroup}`,
        `  server_name: ${azure.serverName}`,
        `  resource_manager_endpoint: ${azure.url}`,
        'tuner:',
        `  ca_file: ${azure.certFile}`,
      ]);
      const run = await runAgent(['--managed-b-flex', '--check'], {
        cwd: dir,
        env: { AZURE_POD_IDENTITY_AUTHORITY_HOST: azure.url, NODE_EXTRA_CA_CERTS: azure.certFile, HTTPS_PROXY: proxy.url },
      });
      transcript.push(run.stdout, run.stderr);
      assert.ok(
        proxy.connects().includes(`127.0.0.1:${new URL(azure.url).port}`),
        `CONNECTs: ${proxy.connects().join(', ')}\n${run.stdout}${run.stderr}`,
      );
      assert.match(run.stdout, /route to Cloud B's Resource Manager: https:\/\/127\.0\.0\.1:\d+: through the proxy http:\/\/tuner:\*+@/);
    });
  });

  test('bad outbound settings are clear configuration errors', async () => {
    const missing = await runAgent(['--local', '--check'], {
      cwd: agentDir(['postgresql:', `  connection_url: ${cluster.agentUrl}`, 'tuner:', '  ca_file: /nonexistent/ca.pem']),
    });
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stderr, /tuner\.ca_file: cannot read \/nonexistent\/ca\.pem \(ENOENT\): give a PEM file of CA certificates/);
    const badProxy = await runAgent(['--local', '--check'], {
      cwd: agentDir([
        'postgresql:',
        `  connection_url: ${cluster.agentUrl}`,
        'tuner:',
        `  proxy_url: socks://tuner:${PROXY_AUTH.password}@proxy:1080`,
      ]),
    });
    assert.equal(badProxy.code, 2);
    assert.match(badProxy.stderr, /tuner\.proxy_url: expected an http:\/\/ or https:\/\/ proxy URL/);
    // An unencoded `/` and `@` in HTTPS_PROXY's password: no URL parser reads it; the agent says
    // which variable, masks the password, and prints no stack.
    const unencoded = await runAgent(['--local', '--check'], {
      cwd: agentDir(['postgresql:', `  connection_url: ${cluster.agentUrl}`]),
      env: { HTTPS_PROXY: 'http://pu:Hp1/Jo2@Ki3@127.0.0.1:18499' },
    });
    assert.equal(unencoded.code, 2, unencoded.stderr);
    assert.match(
      unencoded.stderr,
      /^tuner-agent: HTTPS_PROXY is not a valid proxy URL: percent-encode the user name and password in it \(%40 for an at sign, %2F for a slash, .*\): http:\/\/pu:\*+@127\.0\.0\.1:18499$/m,
    );
    for (const part of ['Hp1', 'Jo2', 'Ki3', 'TypeError', '    at ']) assert.ok(!unencoded.stderr.includes(part), unencoded.stderr);
    transcript.push(missing.stdout, missing.stderr, badProxy.stdout, badProxy.stderr, unencoded.stdout, unencoded.stderr);
  });

  test('a proxy that asks for credentials (407): --check names it, for none and for wrong ones', async () => {
    const dir = agentDir([
      'postgresql:',
      `  connection_url: ${cluster.agentUrl}`,
      'tuner:',
      `  server_url: ${service.url}`,
      '  api_key: tuner_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG',
      '  database_id: 00000000-0000-4000-8000-000000000001',
      `  ca_file: ${ca.certFile}`,
    ]);
    const port = new URL(proxy.url).port;
    const cases = [
      {
        proxyUrl: `http://127.0.0.1:${port}`,
        says: /the proxy asked for credentials \(407 Proxy Authentication Required\): put its user name/,
      },
      // tinyproxy answers a wrong password's CONNECT with 401.
      {
        proxyUrl: `http://tuner:wrong-${PROXY_AUTH.password}@127.0.0.1:${port}`,
        says: /the proxy refused its credentials \(401 Unauthorized\)/,
      },
    ];
    for (const { proxyUrl, says } of cases) {
      const run = await runAgent(['--local', '--check'], { cwd: dir, env: { HTTPS_PROXY: proxyUrl } });
      transcript.push(run.stdout, run.stderr);
      assert.equal(run.code, 3, run.stdout + run.stderr);
      const line = /^ {2}FAIL {2}tuning service reachable at .*$/m.exec(run.stdout)?.[0] ?? '';
      assert.match(line, /: the tuning service at https:\/\/127\.0\.0\.1:\d+ cannot be reached: /, run.stdout);
      assert.match(line, says, run.stdout);
      assert.doesNotMatch(run.stdout + run.stderr, /replaceAll|is not a function/);
    }
  });

  test("the proxy's password appears nowhere in what the agents printed", () => {
    assert.ok(transcript.length > 0);
    for (const text of transcript) assert.ok(!text.includes(PROXY_AUTH.password), text);
  });
});

async function loginTo(url: string, ca: TestCa): Promise<PersonClient> {
  // The test's own HTTP client trusts the service's CA too.
  const { setDefaultCACertificates, getCACertificates } = await import('node:tls');
  setDefaultCACertificates([...getCACertificates('default'), ca.cert]);
  return PersonClient.login(url, 'admin', ADMIN_PASSWORD);
}
