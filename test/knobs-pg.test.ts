// The knob catalog against a real PostgreSQL 15: every knob exists with the catalog's unit,
// type and context; every bound fits the server's own range; the parser agrees with the
// server's parser; and every formatted value reads back from pg_settings as the same number.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import {
  checkContexts,
  enumValues,
  formatForAlterSystem,
  formatSettingValue,
  KNOBS,
  normalizeReal,
  parseSetting,
  parseValue,
  settingsByName,
  validateChange,
  type Knob,
  type KnobValue,
  type Machine,
  type NumericKnob,
  type PgSettingRow,
  reachOf,
} from '../src/knobs/index.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { GiB } from '../src/knobs/units.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';

const MACHINES: Machine[] = [
  { memoryBytes: 1 * GiB, vcpus: 1 },
  { memoryBytes: 16 * GiB, vcpus: 4 },
  { memoryBytes: 256 * GiB, vcpus: 64 },
];

let cluster: Cluster;
let rows: Record<string, PgSettingRow>;

async function readSettings(): Promise<Record<string, PgSettingRow>> {
  return settingsByName(
    await cluster.sql<PgSettingRow>(
      'SELECT name, setting, unit, context, vartype, min_val, max_val, enumvals, pending_restart FROM pg_settings',
    ),
  );
}

before(async () => {
  cluster = await startCluster();
  rows = await readSettings();
});
after(async () => {
  await cluster?.destroy();
});

const isNumeric = (k: Knob): k is NumericKnob => k.type === 'integer' || k.type === 'real';

describe('catalog against pg_settings (PostgreSQL 15)', () => {
  test('the server is PostgreSQL 15', () => {
    assert.equal(Math.floor(Number(rows['server_version_num']?.setting) / 10000), 15);
  });

  test('every knob exists with the same unit, type and context', () => {
    for (const k of KNOBS) {
      const row = rows[k.name];
      assert.ok(row, `${k.name} is in pg_settings`);
      assert.equal(row.unit, k.unit, `${k.name}: unit`);
      assert.equal(row.vartype, k.type, `${k.name}: vartype`);
      assert.equal(row.context, k.context, `${k.name}: context`);
      // parseSetting accepts the server's own row.
      parseSetting(k, row);
      if (k.type === 'enum') {
        const server = enumValues(row);
        for (const v of k.values) assert.ok(server.includes(v), `${k.name}: ${v} in ${server.join(',')}`);
        for (const [alias, to] of Object.entries(k.aliases)) assert.ok(k.values.includes(to), `${k.name}: alias ${alias}`);
      }
    }
    assert.deepEqual(checkContexts(rows), []);
  });

  test('every bound, at every machine size and target, lies within min_val/max_val', () => {
    for (const k of KNOBS.filter(isNumeric)) {
      const row = rows[k.name]!;
      const lo = Number(row.min_val);
      const hi = Number(row.max_val);
      for (const m of MACHINES) {
        for (const target of TARGETS.kindsTuning(reachOf(k))) {
          const b = k.bounds(m, TARGETS.capabilitiesOf(target));
          assert.ok(
            b.min >= lo && b.max <= hi,
            `${k.name} on ${m.memoryBytes / GiB} GiB/${m.vcpus} (${target}): ${b.min}..${b.max} not within ${lo}..${hi}`,
          );
        }
      }
    }
  });
});

// Knobs outside the catalog, only to compare the parser with PostgreSQL's on the units no
// user-context catalog knob has (ms, s).
function probe(name: string, type: 'integer' | 'real', unit: NumericKnob['unit']): NumericKnob {
  return {
    name,
    type,
    unit,
    context: 'user',
    apply: 'reload',
    scale: 'linear',
    summary: 'test probe',
    bounds: () => ({ min: 0, max: 0 }),
  };
}

describe('the parser agrees with PostgreSQL', () => {
  test('values PostgreSQL accepts parse to the number it shows', async () => {
    const cases: Array<[Knob, string]> = [];
    const catalogKnob = (name: string) => KNOBS.find((k) => k.name === name)!;
    for (const v of [
      '64MB',
      '1GB',
      '512kB',
      '4096',
      '4096 kB',
      ' 1.5MB ',
      '64.5kB',
      '65.5kB',
      '66048B',
      '66560B',
      '1.0001GB',
      '1e4',
      '1e4kB',
      '+4096',
      '1TB',
      '0.3GB',
    ])
      cases.push([catalogKnob('work_mem'), v]);
    for (const v of ['100kB', '104kB', '1MB', '12.5', '13.5', '1.7GB', '3.3MB', '8kB', '12289B'])
      cases.push([catalogKnob('effective_cache_size'), v]);
    for (const v of ['1.1', '1.23456789', '.5', '5.', '1e0', ' 2 ', '4.0000001']) cases.push([catalogKnob('random_page_cost'), v]);
    for (const v of ['4.5', '5.5', '3']) cases.push([catalogKnob('max_parallel_workers'), v]);
    for (const v of ['t', 'of', 'ON', '1', 'yes', 'tr', 'No', 'FALSE']) cases.push([catalogKnob('jit'), v]);
    for (const v of ['on', 'PGLZ', 'true', '1', 'zstd', 'lz4', 'off', 'no']) cases.push([catalogKnob('wal_compression'), v]);
    // lock_timeout, not statement_timeout: a value such as 0.5ms would also cancel the very
    // query that reads it back on a loaded machine. Nothing here waits for a lock.
    const ms = probe('lock_timeout', 'integer', 'ms');
    for (const v of ['100us', '1500us', '2500us', '1.5s', '5min', '0.5ms', '1.5ms', '2.5ms', '1h', '0.001d', '200']) cases.push([ms, v]);
    // (Linux caps TCP_KEEPIDLE at 32767 s and the server shows the socket's value: stay below.)
    const s = probe('tcp_keepalives_idle', 'integer', 's');
    for (const v of ['1500ms', '2500ms', '3500ms', '1.5min', '0.01h', '90', '0.05d']) cases.push([s, v]);

    const client = new pg.Client({ connectionString: cluster.adminUrl });
    await client.connect();
    try {
      for (const [knob, text] of cases) {
        await client.query(`SET ${knob.name} = ${formatLiteral(text)}`);
        const r = await client.query<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [knob.name]);
        const ours = parseValue(knob, text);
        assert.ok(ours.ok, `${knob.name} = '${text}': PostgreSQL accepts it, we refused: ${ours.ok ? '' : ours.reason}`);
        const shown = r.rows[0]?.setting;
        assert.equal(formatSettingValue(knob, ours.value), shown, `${knob.name} = '${text}'`);
      }
    } finally {
      await client.end();
    }
  });

  test('junk PostgreSQL refuses is refused here too', async () => {
    const catalogKnob = (name: string) => KNOBS.find((k) => k.name === name)!;
    const cases: Array<[Knob, string]> = [
      [catalogKnob('work_mem'), '64mb'],
      [catalogKnob('work_mem'), '4MB x'],
      [catalogKnob('work_mem'), 'abc'],
      [catalogKnob('work_mem'), ''],
      [catalogKnob('work_mem'), '1e'],
      [catalogKnob('work_mem'), '200ms'],
      [catalogKnob('work_mem'), '2147483648'],
      [catalogKnob('work_mem'), '3TB'],
      [catalogKnob('random_page_cost'), 'nan'],
      [catalogKnob('random_page_cost'), '1.1x'],
      [catalogKnob('max_parallel_workers'), '2MB'],
      [catalogKnob('jit'), 'o'],
      [catalogKnob('jit'), 'maybe'],
      [catalogKnob('wal_compression'), 'gzip'],
      [catalogKnob('bgwriter_delay'), '1MB'],
    ];
    const client = new pg.Client({ connectionString: cluster.adminUrl });
    await client.connect();
    try {
      for (const [knob, text] of cases) {
        // SET fails for a sighup knob for another reason; set_config would too: use a
        // session-settable knob with the same unit for the server's opinion.
        const probeName = knob.name === 'bgwriter_delay' ? 'lock_timeout' : knob.name;
        await assert.rejects(client.query(`SET ${probeName} = ${formatLiteral(text)}`), `PostgreSQL accepted ${probeName} = '${text}'`);
        assert.equal(parseValue(knob, text).ok, false, `we accepted ${knob.name} = '${text}'`);
      }
    } finally {
      await client.end();
    }
  });
});

function formatLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** A value of `knob` at position `at` (0 = min, 1 = max) of its bounds, on the knob's scale. */
function pick(knob: Knob, machine: Machine, at: number): KnobValue {
  if (knob.type === 'bool') return at < 0.5 ? 'off' : 'on';
  if (knob.type === 'enum') return knob.values[Math.round(at * (knob.values.length - 1))]!;
  const { min, max } = knob.bounds(machine, TARGETS.capabilitiesOf('local'));
  const x = knob.scale === 'log' ? min * (max / min) ** at : min + (max - min) * at;
  return knob.type === 'integer' ? Math.min(max, Math.max(min, Math.round(x))) : normalizeReal(x);
}

/** ALTER SYSTEM SETs every value, makes it take effect, and returns pg_settings afterwards. */
async function applyAll(values: Map<Knob, KnobValue>): Promise<Record<string, PgSettingRow>> {
  for (const [knob, value] of values) await cluster.sql(`ALTER SYSTEM SET ${knob.name} = ${formatForAlterSystem(knob, value)}`);
  if ([...values.keys()].some((k) => k.apply === 'restart')) {
    await cluster.restart();
    return readSettings();
  }
  await cluster.sql('SELECT pg_reload_conf()');
  // The reload is asynchronous: wait until a new session sees every value, or give up and
  // let the comparison below say which value differs.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const now = await readSettings();
    const done = [...values].every(([k, v]) => now[k.name]?.setting === formatSettingValue(k, v));
    if (done || Date.now() > deadline) return now;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('formatForAlterSystem round-trips through pg_settings', () => {
  // Positions in each knob's bounds: both ends, the middle of the scale, and an odd point whose
  // value has many digits (rounding must still read back exactly).
  const positions = [0, 1, 0.5, 0.381966];
  for (const machine of MACHINES) {
    for (const at of positions) {
      test(`${machine.memoryBytes / GiB} GiB / ${machine.vcpus} vCPUs, at ${at} of each range`, async () => {
        // Restart knobs only where the value fits the test host: this server really allocates
        // shared_buffers at start, and a 256 GiB machine's 40 % would not fit.
        const knobs = KNOBS.filter((k) => k.apply === 'reload' || machine.memoryBytes <= 1 * GiB);
        const values = new Map(knobs.map((k) => [k, pick(k, machine, at)] as const));
        const after = await applyAll(values);
        for (const [knob, value] of values) {
          const row = after[knob.name]!;
          assert.equal(row.pending_restart, false, `${knob.name} is pending a restart`);
          assert.equal(
            parseSetting(knob, row),
            value,
            `${knob.name}: set ${formatForAlterSystem(knob, value)}, pg_settings shows ${row.setting}`,
          );
        }
        await cluster.sql('ALTER SYSTEM RESET ALL');
      });
    }
  }
});

describe('validateChange on a real server', () => {
  test('a validated change applied with its literals reads back as the validated values', async () => {
    await cluster.restart(); // back to defaults after the round-trips above
    const settings = await readSettings();
    const machine: Machine = { memoryBytes: 16 * GiB, vcpus: 4 };
    const change = {
      work_mem: '48MB',
      random_page_cost: '1.1',
      max_wal_size: '3GB',
      bgwriter_delay: '150ms',
      jit: 'off',
      effective_io_concurrency: 200,
      checkpoint_timeout: '15min',
    };
    const verdict = validateChange(change, {
      machine,
      mode: 'reload-only',
      target: 'local',
      capabilities: TARGETS.capabilitiesOf('local'),
      settings,
    });
    assert.ok(verdict.ok, verdict.ok ? '' : verdict.errors.join('\n'));
    const byKnob = new Map(verdict.entries.map((e) => [KNOBS.find((k) => k.name === e.name)!, e.value] as const));
    const after = await applyAll(byKnob);
    for (const e of verdict.entries) {
      const knob = KNOBS.find((k) => k.name === e.name)!;
      assert.equal(parseSetting(knob, after[e.name]!), e.value, e.name);
      assert.equal(after[e.name]!.setting, formatSettingValue(knob, e.value), e.name);
    }
    // The same change on Cloud B's list: checkpoint_timeout and jit are not there.
    const b = validateChange(change, {
      machine,
      mode: 'reload-only',
      target: 'managed-b-flex',
      capabilities: TARGETS.capabilitiesOf('managed-b-flex'),
      settings,
    });
    assert.ok(!b.ok);
    assert.deepEqual(b.problems.map((p) => p.knobs[0]).sort(), ['checkpoint_timeout', 'jit']);
    await cluster.sql('ALTER SYSTEM RESET ALL');
  });

  test('restart knobs in reload-only mode are refused against the real contexts', async () => {
    const settings = await readSettings();
    const r = validateChange(
      { shared_buffers: '256MB', max_worker_processes: 12, wal_buffers: '16MB' },
      {
        machine: { memoryBytes: 16 * GiB, vcpus: 4 },
        mode: 'reload-only',
        target: 'local',
        capabilities: TARGETS.capabilitiesOf('local'),
        settings,
      },
    );
    assert.ok(!r.ok);
    assert.deepEqual(
      r.problems.map((p) => p.code),
      ['needs-restart', 'needs-restart', 'needs-restart'],
    );
  });
});
