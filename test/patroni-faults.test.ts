// The Patroni target when things break, against a real cluster (src/lab/patroni.ts): the REST
// API answering 503 (through a small forwarding proxy in front of the real API), and etcd
// stopped during a trial. Each case ends with the dynamic configuration as the agent found it.
// And --check's REST API checks, with their fixes.
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { createPatroniTarget, type PatroniTarget } from '../src/agent/targets/patroni/target.ts';
import { freePort } from '../src/lab/cluster.ts';
import { startPatroniLab, type PatroniLab } from '../src/lab/patroni.ts';
import { until } from './helpers/until.ts';

let lab: PatroniLab;
let db: Db;
const targets: PatroniTarget[] = [];
let proxy: Server;
let proxyUrl: string;
/** What the proxy does: forward, answer 503 to everything, or to PATCH only. */
let proxyMode: 'forward' | '503' | 'patch-503' = 'forward';

before(async () => {
  const started = Date.now();
  lab = await startPatroniLab();
  console.log(`patroni lab started in ${Date.now() - started} ms`);
  db = await connectDb(lab.members[0]!.agentUrl);
  const upstream = new URL(lab.members[0]!.apiUrl);
  proxy = createServer((req, res) => {
    if (proxyMode === '503' || (proxyMode === 'patch-503' && req.method === 'PATCH')) {
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"state": "unknown"}');
      return;
    }
    const forward = request(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    forward.on('error', () => res.writeHead(502).end());
    req.pipe(forward);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${port}`;
});
after(async () => {
  for (const t of targets) await t.close();
  await db?.close();
  proxy?.close();
  await lab?.stop();
});

function target(restApiUrls: string[], password = lab.apiPassword): PatroniTarget {
  const t = createPatroniTarget({
    db,
    config: {
      postgresql: { connectionUrl: lab.members[0]!.agentUrl, includeQueries: true, includePlans: false, allowRestart: false },
      targets: {},
    },
    patroni: { restApiUrls, username: lab.apiUser, password, applyTimeoutSeconds: 30, maxReplicaLagMb: 64 },
  });
  targets.push(t);
  return t;
}

const dynamicConfig = async () => (await lab.api(await lab.leader(), 'GET', '/config')).body;
const workMemEverywhere = async () =>
  Promise.all(
    lab.members.map(async (m) => (await m.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`))[0]?.setting),
  );

test('--check: the REST API reached, authenticated, the cluster running, the DCS seen; each failure with its fix', async () => {
  const good = await target([...lab.members.map((m) => m.apiUrl), 'http://127.0.0.1:1']).preflight();
  const byName = new Map(good.map((c) => [c.name, c]));
  assert.equal(byName.get('Patroni REST API authentication (PATCH /config, POST /restart)')?.ok, true);
  assert.equal(byName.get("the Patroni cluster's state")?.ok, true);
  assert.equal(byName.get('the DCS reachable through Patroni')?.ok, true);
  const unreachable = byName.get('Patroni REST API http://127.0.0.1:1');
  assert.deepEqual([unreachable?.ok, unreachable?.severity], [false, 'warning']);
  assert.match(unreachable?.fix ?? '', /patroni\.rest_api_urls/);
  assert.deepEqual(
    good.filter((c) => !c.ok && c.severity !== 'warning').map((c) => c.name),
    [],
  );

  const wrong = await target(
    lab.members.map((m) => m.apiUrl),
    'not-the-password',
  ).preflight();
  const auth = wrong.find((c) => c.name.startsWith('Patroni REST API authentication'));
  assert.equal(auth?.ok, false);
  assert.match(auth?.fix ?? '', /patroni\.username and patroni\.password/);

  const none = await target(['http://127.0.0.1:1']).preflight();
  assert.equal(none.find((c) => c.name === 'Patroni REST API reachable')?.ok, false);
});

test('the REST API answering 503: nothing is written, a trial is put back once it answers again', async () => {
  const t = target([proxyUrl]);
  const found = await dynamicConfig();
  const previous = await t.readOverrides(['work_mem']);

  proxyMode = 'patch-503';
  await assert.rejects(t.writeOverrides({ work_mem: { set: true, value: '10240' } }, { allowRestart: false }), /HTTP 503/);
  assert.deepEqual(await dynamicConfig(), found);

  proxyMode = 'forward';
  await t.writeOverrides({ work_mem: { set: true, value: '10240' } }, { allowRestart: false });
  proxyMode = '503';
  await assert.rejects(t.writeOverrides(previous, { allowRestart: false }), /HTTP 503/);
  proxyMode = 'forward';
  await t.writeOverrides(previous, { allowRestart: false });
  assert.deepEqual(await dynamicConfig(), found);
  assert.deepEqual(await workMemEverywhere(), ['4096', '4096']);
});

test('etcd stopped during a trial: the revert fails while it is away and succeeds once it is back', async () => {
  const t = target([lab.members[0]!.apiUrl]);
  const found = await dynamicConfig();
  const previous = await t.readOverrides(['work_mem']);
  await t.writeOverrides({ work_mem: { set: true, value: '12288' } }, { allowRestart: false });
  await lab.stopEtcd();
  try {
    // Patroni cannot answer for the cluster without its DCS: the agent learns nothing and writes nothing.
    await assert.rejects(t.writeOverrides(previous, { allowRestart: false }), /no Patroni REST API answered|PATCH \/config failed/);
    // --check names the DCS once Patroni has not seen it for longer than its ttl.
    const dcs = await until(
      'the DCS check to fail',
      async () => {
        const check = (await t.preflight()).find((c) => c.name === 'the DCS reachable through Patroni');
        return check?.ok === false ? check : null;
      },
      90_000,
      1_000,
    );
    assert.match(dcs.detail, /s ago/);
    assert.match(dcs.fix ?? '', /check the DCS/);
  } finally {
    await lab.startEtcd();
  }
  await lab.waitHealthy();
  await t.writeOverrides(previous, { allowRestart: false });
  assert.deepEqual(await dynamicConfig(), found);
  assert.deepEqual(await workMemEverywhere(), ['4096', '4096']);
});
