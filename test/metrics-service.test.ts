// tuner-service's /metrics for Prometheus: off by default (404); behind TUNER_METRICS_TOKEN on the
// main listener (401 without it or with another); on a listener of its own with
// TUNER_METRICS_LISTEN. Scraped as Prometheus would, the text parses as the exposition format and
// the counters move with what agents do (protocol v1 over HTTP). The storage-errors counter is
// driven through a real PGlite driver.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, parseServiceArgs } from '../src/service/app/config.ts';
import { observeDriverErrors } from '../src/service/storage/observed-driver.ts';
import { openPgliteDriver } from '../src/service/storage/pglite-driver.ts';
import { parseExposition, scrape } from './helpers/prometheus.ts';
import { reportRequest, startRequest } from './helpers/service-reports.ts';
import {
  ADMIN_PASSWORD,
  AgentClient,
  PersonClient,
  STORAGE_KINDS,
  createServiceStore,
  startTestService,
  type ServiceStore,
} from './helpers/service.ts';

const TOKEN = 'metrics-token-for-tests-0123456789';

describe('tuner-service /metrics', () => {
  let store: ServiceStore;

  before(async () => {
    store = await createServiceStore('pglite');
  });
  after(async () => {
    await store?.dispose();
  });

  test('off by default: /metrics is not found', async () => {
    const service = await startTestService(store);
    try {
      const response = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(response.status, 404);
      assert.equal(service.metricsUrl, undefined);
    } finally {
      await service.close();
    }
  });

  for (const kind of STORAGE_KINDS) {
    test(`behind TUNER_METRICS_TOKEN on the main listener: 401 without the token, counters that move with the agents (${kind} storage)`, async () => {
      const own = await createServiceStore(kind);
      const service = await startTestService(own, { TUNER_METRICS_TOKEN: TOKEN });
      try {
        const url = `${service.url}/metrics`;
        for (const headers of [{}, { authorization: 'Bearer not-the-token-at-all-000000' }, { authorization: TOKEN }]) {
          const response = await fetch(url, { headers });
          assert.equal(response.status, 401, JSON.stringify(headers));
          const body = await response.text();
          assert.match(body, /TUNER_METRICS_TOKEN/);
          assert.ok(!body.includes(TOKEN), 'the token is never shown');
        }

        const first = await scrape(url, TOKEN);
        assert.equal(first.types.get('tuner_service_reports_total'), 'counter');
        assert.equal(first.types.get('tuner_service_report_duration_seconds'), 'histogram');
        assert.equal(first.types.get('tuner_service_agents_connected'), 'gauge');
        assert.equal(first.value('tuner_service_reports_total', { outcome: 'accepted' }), 0);
        assert.equal(first.value('tuner_service_commands_total', { kind: 'apply', outcome: 'applied' }), 0);
        assert.equal(first.value('tuner_service_tuning_sessions', { state: 'iterating' }), 0);
        assert.equal(first.value('tuner_service_storage_errors_total'), 0);

        const person = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
        const { databaseId, apiKey } = await person.createDatabase('metrics', 'local');
        const agent = new AgentClient(service.url, databaseId, apiKey);
        const started = await agent.start<{ leaseId: string }>(startRequest());
        assert.equal(started.status, 200);
        const leaseId = started.body.leaseId;
        for (let seq = 0; seq < 3; seq++) assert.equal((await agent.report(reportRequest(leaseId, seq), { gzip: true })).status, 200);
        const wrongKey = new AgentClient(service.url, databaseId, `${apiKey.slice(0, -4)}AAAA`);
        assert.equal((await wrongKey.report(reportRequest(leaseId, 3))).status, 401);
        assert.equal((await agent.report(reportRequest('00000000-0000-4000-8000-000000000000', 3))).status, 409);

        const during = await scrape(url, TOKEN);
        assert.equal(during.value('tuner_service_agents_connected'), 1);
        assert.equal(during.value('tuner_service_reports_total', { outcome: 'accepted' }), 3);
        assert.equal(during.value('tuner_service_reports_total', { outcome: 'unauthorized' }), 1);
        assert.equal(during.value('tuner_service_reports_total', { outcome: 'lease_expired' }), 1);
        assert.equal(during.value('tuner_service_report_duration_seconds_count'), 5);
        assert.equal(during.value('tuner_service_report_duration_seconds_bucket', { le: '+Inf' }), 5);
        assert.ok(during.value('tuner_service_report_duration_seconds_sum') > 0);

        const issued = await person.post<{ command: { id: string } }>(`/api/manage/databases/${databaseId}/commands`, {
          kind: 'apply',
          values: { work_mem: '8MB' },
          keep: true,
        });
        assert.equal(issued.status, 201);
        const answer = await agent.report<{ command: { id: string; kind: string } | null }>(reportRequest(leaseId, 3));
        assert.equal(answer.body.command?.id, issued.body.command.id);
        const ack = await agent.ack(issued.body.command.id, {
          leaseId,
          status: 'applied',
          effective: { work_mem: '8MB' },
          errors: [],
          restarted: false,
          restored: false,
        });
        assert.equal(ack.status, 204);
        assert.equal((await agent.stop({ leaseId })).status, 204);

        const later = await scrape(url, TOKEN);
        assert.equal(later.value('tuner_service_commands_total', { kind: 'apply', outcome: 'applied' }), 1);
        assert.equal(later.value('tuner_service_commands_total', { kind: 'revert', outcome: 'applied' }), 0);
        assert.equal(later.value('tuner_service_reports_total', { outcome: 'accepted' }), 4);
        assert.equal(later.value('tuner_service_agents_connected'), 0, 'the agent released its lease');
      } finally {
        await service.close();
        await own.dispose();
      }
    });
  }

  test('TUNER_METRICS_LISTEN: a listener of its own, and none on the main one', async () => {
    const service = await startTestService(store, { TUNER_METRICS_LISTEN: '127.0.0.1:0' });
    try {
      assert.ok(service.metricsUrl, 'the separate listener is up');
      assert.notEqual(new URL(service.metricsUrl).port, new URL(service.url).port);
      const metrics = await scrape(service.metricsUrl);
      assert.equal(metrics.value('tuner_service_reports_total', { outcome: 'accepted' }), 0);
      assert.equal((await fetch(`${service.url}/metrics`)).status, 404);
      assert.equal((await fetch(service.metricsUrl.replace('/metrics', '/other'))).status, 404);
    } finally {
      await service.close();
    }
  });

  test('TUNER_METRICS_LISTEN with TUNER_METRICS_TOKEN: the separate listener wants the token too', async () => {
    const service = await startTestService(store, { TUNER_METRICS_LISTEN: '127.0.0.1:0', TUNER_METRICS_TOKEN: TOKEN });
    try {
      assert.equal((await fetch(service.metricsUrl!)).status, 401);
      assert.equal((await scrape(service.metricsUrl!, TOKEN)).value('tuner_service_agents_connected'), 0);
    } finally {
      await service.close();
    }
  });

  test('a metrics token too short, or a bad listen address, is refused naming the variable, never showing the token', () => {
    const refused = (env: Record<string, string>, argv: string[] = []): string => {
      try {
        parseServiceArgs(argv, env);
      } catch (err) {
        assert.ok(err instanceof ConfigError);
        return err.message;
      }
      throw new Error('expected a ConfigError');
    };
    const short = refused({ TUNER_METRICS_TOKEN: 'short-secret' });
    assert.match(short, /TUNER_METRICS_TOKEN: expected 16 to 200 printable characters/);
    assert.ok(!short.includes('short-secret'));
    assert.match(refused({}, ['--metrics-listen', 'localhost']), /--metrics-listen: expected HOST:PORT/);
  });
});

describe('the storage-errors counter', () => {
  test('counts each failed statement once, and not what the caller throws inside a transaction', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tuner-metrics-driver-'));
    const driver = await openPgliteDriver(dir);
    try {
      const errors: unknown[] = [];
      const observed = observeDriverErrors(driver, (err) => errors.push(err));
      await assert.rejects(observed.query('SELECT * FROM no_such_table'));
      assert.equal(errors.length, 1);
      await assert.rejects(observed.transaction((tx) => tx.query('SELECT * FROM no_such_table')));
      assert.equal(errors.length, 2, 'a statement failing in a transaction counts once');
      await assert.rejects(
        observed.transaction(() => Promise.reject(new Error('the caller refused'))),
        /the caller refused/,
      );
      assert.equal(errors.length, 2, "the caller's own error is not a storage error");
      assert.deepEqual(await observed.query<{ ok: number }>('SELECT 1 AS ok'), [{ ok: 1 }]);
      assert.equal(errors.length, 2);
    } finally {
      await driver.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the exposition parser refuses what Prometheus would', () => {
    assert.throws(() => parseExposition('a_total 1\n'), /before \(or without\) its TYPE/);
    assert.throws(() => parseExposition('# TYPE a counter\na{b="1" 1\n'), /not a sample line|bad label/);
    assert.throws(() => parseExposition('# TYPE a counter\na 1'), /newline/);
    assert.equal(parseExposition('# TYPE a counter\na{b="x\\"y"} 2\n').value('a', { b: 'x"y' }), 2);
  });
});
