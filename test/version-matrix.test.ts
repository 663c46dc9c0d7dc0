// The agent's core on a real server of every major the clouds offer (13-17) and the current
// release (18): collection and its version differences, the catalog against the server's own
// pg_settings, apply → read back → revert through the real agent process with its journal, and
// the guardrails. Debian's binaries where installed, else the embedded builds
// (src/lab/postgres-binaries.ts). The rest of the suite runs on one version.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { buildMetricsReport, createCollector, diffSnapshots, type Snapshot } from '../src/agent/collect/index.ts';
import { AGENT_QUERY_MARKER, connectDb, type Db } from '../src/agent/database/db.ts';
import { localGrantsSql } from '../src/agent/targets/local/permissions.ts';
import { KNOBS, reachOf, settingsByName, validateChange, type PgSettingRow } from '../src/knobs/index.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { availableMajors, SUPPORTED_MAJORS } from '../src/lab/postgres-binaries.ts';
import { MetricsReportSchema } from '../src/protocol/report.ts';
import { runAgent } from './helpers/agent-process.ts';
import { until } from './helpers/until.ts';
import { createWreckableTable, guardRevertsWreckingTrial, startRangeWorkload } from './helpers/wrecking-trial.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';

const available = availableMajors();
const missing = SUPPORTED_MAJORS.filter((m) => !available.includes(m));
if (missing.length > 0 && process.env['CI'] === 'true') {
  // CI runs the whole matrix: a missing build is a broken install, not a reason to skip.
  throw new Error(`no server binaries for PostgreSQL ${missing.join(', ')}: npm ci on linux-x64 installs them (pg-embedded-*)`);
}

/** What each major ships: pg_stat_statements' default version and the statistics views. */
const EXPECTED: Record<number, { pgss: string; checkpointer: boolean; wal: boolean; io: boolean; alterSystemGrant: boolean }> = {
  13: { pgss: '1.8', checkpointer: false, wal: false, io: false, alterSystemGrant: false },
  14: { pgss: '1.9', checkpointer: false, wal: true, io: false, alterSystemGrant: false },
  15: { pgss: '1.10', checkpointer: false, wal: true, io: false, alterSystemGrant: true },
  16: { pgss: '1.10', checkpointer: false, wal: true, io: true, alterSystemGrant: true },
  17: { pgss: '1.11', checkpointer: true, wal: true, io: true, alterSystemGrant: true },
  18: { pgss: '1.12', checkpointer: true, wal: true, io: true, alterSystemGrant: true },
};

/** Knobs a major lacks or types differently, each refused by the agent's own check there. */
const NOT_TUNABLE_ON: Record<number, string[]> = { 13: ['wal_compression'], 14: ['wal_compression'] };

const POINT = 'SELECT count(*) FROM pg_class WHERE relpages > $1';

async function runPoint(cluster: Cluster, times: number): Promise<void> {
  const client = new pg.Client({ connectionString: cluster.adminUrl });
  await client.connect();
  try {
    for (let i = 0; i < times; i++) await client.query(POINT, [i]);
  } finally {
    await client.end();
  }
}

for (const major of SUPPORTED_MAJORS) {
  const skip = available.includes(major)
    ? false
    : `no PostgreSQL ${major} server binaries here (neither Debian's nor pg-embedded-${major})`;
  describe(`PostgreSQL ${major}`, { skip }, () => {
    const expected = EXPECTED[major]!;
    let cluster: Cluster;
    let db: Db;
    const dirs: string[] = [];

    before(async () => {
      cluster = await startCluster({ major });
      await cluster.sql('GRANT pg_monitor TO agent_user');
      db = await connectDb(cluster.agentUrl);
    });
    after(async () => {
      await db?.close();
      await cluster?.destroy();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    function agentDir(): string {
      const dir = mkdtempSync(join(tmpdir(), `tuner-pg${major}-`));
      dirs.push(dir);
      const yaml = [
        'postgresql:',
        `  connection_url: ${cluster.agentUrl}`,
        'tuner:',
        '  server_url: http://127.0.0.1:9',
        '  api_key: tk_test_matrix_0000000000000000',
        '  database_id: 0b7c2c44-7d7e-4e0b-9b7e-3c4c1f2a9d10',
      ];
      writeFileSync(join(dir, 'agent.yaml'), `${yaml.join('\n')}\n`);
      return dir;
    }

    test('discovers what this server has: pg_stat_statements version, checkpointer, WAL and I/O views', async () => {
      const caps = await createCollector(db, { includeQueries: true }).capabilities();
      assert.equal(Math.floor(caps.serverVersionNum / 10000), major);
      assert.equal(caps.pgss.version, expected.pgss);
      assert.equal(caps.checkpointer !== null, expected.checkpointer, 'pg_stat_checkpointer (17+)');
      assert.equal(caps.wal !== null, expected.wal, 'pg_stat_wal (14+)');
      assert.ok(caps.bgwriter, 'pg_stat_bgwriter is on every version');
      const [io] = await cluster.sql<{ present: boolean }>(`SELECT to_regclass('pg_catalog.pg_stat_io') IS NOT NULL AS present`);
      assert.equal(io?.present, expected.io, 'pg_stat_io (16+): not read by the agent yet, see docs/versions.md');
    });

    test("an idle interval reports none of the agent's own statements", async () => {
      const collector = createCollector(db, { includeQueries: true });
      let previous: Snapshot = await collector.collect();
      // Each round runs the agent's whole collection; from the second round on, every statement
      // the agent ran exists and its calls grow, so a leak would show in the delta.
      for (let round = 0; round < 3; round++) {
        const current = await collector.collect();
        const delta = diffSnapshots(previous, current);
        assert.deepEqual(
          delta.statements.map((s) => s.text ?? s.queryId),
          [],
          `round ${round}: the idle delta holds only the agent's own work`,
        );
        previous = current;
      }
      const [own] = await cluster.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_statements WHERE userid = 'agent_user'::regrole AND calls > 1`,
      );
      assert.ok(own && own.n >= 3, `the agent's statements are in pg_stat_statements (${own?.n}), so this test can fail`);
    });

    test("a workload's statement is counted exactly, and the report is valid on this version", async () => {
      const collector = createCollector(db, { includeQueries: true });
      const first = await collector.collect();
      await runPoint(cluster, 7);
      const delta = diffSnapshots(first, await collector.collect());
      const point = delta.statements.filter((s) => s.text?.includes('pg_class WHERE relpages'));
      assert.equal(point.length, 1, JSON.stringify(delta.statements.map((s) => s.text)));
      assert.equal(point[0]!.calls, 7);
      assert.ok(!delta.statements.some((s) => s.text?.includes(AGENT_QUERY_MARKER)));
      const report = MetricsReportSchema.parse(buildMetricsReport(delta, { includeQueries: true }));
      assert.equal(report.statements.pgssVersion, expected.pgss);
      assert.ok(report.statements.top.some((s) => s.calls === 7));
    });

    test("checkpoints and WAL come from this version's views, with the columns it has", async () => {
      const collector = createCollector(db, { includeQueries: false });
      const first = await collector.collect();
      await cluster.sql(`CREATE TABLE matrix_wal AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g`);
      await cluster.sql('CHECKPOINT');
      // Before 15 the statistics travel through the stats collector, up to half a second late.
      const report = await until(
        'the checkpoint in the statistics',
        async () => {
          const r = MetricsReportSchema.parse(
            buildMetricsReport(diffSnapshots(first, await collector.collect()), { includeQueries: false }),
          );
          return (r.checkpointer?.checkpointsRequested ?? 0) >= 1 && r;
        },
        15_000,
      );
      assert.equal(report.checkpointer?.source, expected.checkpointer ? 'pg_stat_checkpointer' : 'pg_stat_bgwriter');
      assert.ok((report.checkpointer?.checkpointsRequested ?? 0) >= 1, 'the CHECKPOINT is counted as requested');
      assert.equal(report.checkpointer?.buffersBackend === null, major >= 17, 'buffers_backend is gone from 17 on');
      if (!expected.wal) {
        assert.equal(report.wal, null);
        return;
      }
      assert.ok(report.wal && report.wal.bytes > 0 && report.wal.records > 0, JSON.stringify(report.wal));
      assert.equal(report.wal.write === null, major >= 18, 'wal_write is gone from 18 on (moved to pg_stat_io)');
    });

    test("the knob catalog against this server's pg_settings: each knob fits, or the agent refuses it here", async () => {
      const rows = settingsByName(
        await cluster.sql<PgSettingRow>(
          'SELECT name, setting, unit, context, vartype, min_val, max_val, enumvals, pending_restart FROM pg_settings',
        ),
      );
      const refusedHere: string[] = [];
      const machine = { memoryBytes: 16 * 1024 ** 3, vcpus: 4 };
      for (const knob of KNOBS.filter((k) => TARGETS.kindsTuning(reachOf(k)).includes('local'))) {
        const row = rows[knob.name];
        const fits = row !== undefined && row.vartype === knob.type && row.unit === knob.unit;
        if (!fits) {
          // The agent's own check must refuse what this server cannot take as the catalog means it.
          const value =
            knob.type === 'enum'
              ? knob.values[0]!
              : knob.type === 'bool'
                ? 'on'
                : knob.bounds(machine, TARGETS.capabilitiesOf('local')).min;
          const result = validateChange(
            { [knob.name]: value },
            { settings: rows, machine, target: 'local', capabilities: TARGETS.capabilitiesOf('local'), mode: 'restart' },
          );
          assert.equal(result.ok, false, `${knob.name} = ${value} must be refused on ${major}`);
          refusedHere.push(knob.name);
          continue;
        }
        if (knob.type === 'integer' || knob.type === 'real') {
          const b = knob.bounds(machine, TARGETS.capabilitiesOf('local'));
          assert.ok(
            b.min >= Number(row.min_val) && b.max <= Number(row.max_val),
            `${knob.name}: ${b.min}..${b.max} within ${row.min_val}..${row.max_val}`,
          );
        }
      }
      assert.deepEqual(refusedHere.sort(), NOT_TUNABLE_ON[major] ?? []);
    });

    test('apply → read back → revert through the agent; a revert with nothing applied writes nothing', async () => {
      const dir = agentDir();
      if (!expected.alterSystemGrant) {
        // Before 15, ALTER SYSTEM needs a superuser: the apply fails cleanly, and the revert that
        // follows has nothing to undo, so it must not run ALTER SYSTEM (which would fail again).
        const refused = await runAgent(['--local', '--apply', 'work_mem=8MB'], { cwd: dir });
        assert.notEqual(refused.code, 0);
        assert.match(refused.stdout + refused.stderr, /superuser/);
        const nothing = await runAgent(['--local', '--revert'], { cwd: dir });
        assert.equal(nothing.code, 0, nothing.stdout + nothing.stderr);
        assert.doesNotMatch(nothing.stdout + nothing.stderr, /must be superuser|failed/);
        await cluster.sql('ALTER ROLE agent_user SUPERUSER');
      } else {
        for (const line of localGrantsSql('agent_user')
          .split('\n')
          .filter((l) => l.startsWith('GRANT')))
          await cluster.sql(line);
      }
      const setting = async (name: string) =>
        (await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]))[0]?.setting;
      const before = { work_mem: await setting('work_mem'), random_page_cost: await setting('random_page_cost') };
      const applied = await runAgent(['--local', '--apply', 'work_mem=8MB', '--apply', 'random_page_cost=1.1'], { cwd: dir });
      assert.equal(applied.code, 0, applied.stdout + applied.stderr);
      assert.match(applied.stdout, /read back from pg_settings: work_mem = 8192, random_page_cost = 1\.1/);
      assert.equal(await setting('work_mem'), '8192');
      const reverted = await runAgent(['--local', '--revert'], { cwd: dir });
      assert.equal(reverted.code, 0, reverted.stdout + reverted.stderr);
      assert.deepEqual({ work_mem: await setting('work_mem'), random_page_cost: await setting('random_page_cost') }, before);
      const again = await runAgent(['--local', '--revert'], { cwd: dir });
      assert.equal(again.code, 0, again.stdout + again.stderr);
      assert.match(again.stdout, /nothing to revert/);
    });

    test('the guardrails revert a wrecking trial by themselves', { timeout: 300_000 }, async () => {
      await createWreckableTable(cluster);
      const dir = mkdtempSync(join(tmpdir(), `tuner-pg${major}-guard-`));
      dirs.push(dir);
      const workload = await startRangeWorkload(cluster);
      try {
        await guardRevertsWreckingTrial(cluster, db, dir, workload);
      } finally {
        await workload.stop();
      }
    });
  });
}
