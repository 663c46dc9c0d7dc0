// The schema, as forward-only migrations applied in order at start. The same SQL runs on PGlite
// and on PostgreSQL. Never edit a migration that has shipped: add the next one.
import type { SqlDriver } from './driver.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'accounts, users, sessions, databases, api keys, leases, reports, events, commands',
    sql: `
CREATE TABLE accounts (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id),
  username text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  is_admin boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Only a hash of the session token is kept, like API keys: a copy of the table opens nothing.
CREATE TABLE sessions (
  token_hash text PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  csrf_token text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

CREATE TABLE databases (
  id uuid PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id),
  name text NOT NULL,
  target text NOT NULL,
  -- NULL: the service-wide default.
  report_interval_seconds integer,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX databases_account ON databases (account_id, created_at);

CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  database_id uuid NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
  key_hash text NOT NULL UNIQUE,
  display_prefix text NOT NULL,
  label text NOT NULL,
  created_by uuid REFERENCES users (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_keys_live ON api_keys (database_id) WHERE revoked_at IS NULL;

-- One row per database: the agent that holds (or last held) its lease.
CREATE TABLE agent_leases (
  database_id uuid PRIMARY KEY REFERENCES databases (id) ON DELETE CASCADE,
  lease_id text NOT NULL,
  hostname text NOT NULL,
  pid bigint NOT NULL,
  agent_version text NOT NULL,
  target text NOT NULL,
  target_identity text NOT NULL,
  mode text NOT NULL,
  allow_restart boolean NOT NULL,
  include_queries boolean NOT NULL,
  system jsonb NOT NULL,
  started_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  released_at timestamptz,
  last_report_at timestamptz,
  last_seq bigint
);

-- The figures the dashboard charts are columns; the whole report is kept as the agent sent it,
-- gzip-compressed JSON (report-body.ts): cheap to write, and only the latest is read whole.
CREATE TABLE reports (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  database_id uuid NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
  lease_id text NOT NULL,
  seq bigint NOT NULL,
  sent_at timestamptz NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  avg_query_runtime_ms double precision,
  tps double precision,
  cache_hit_ratio double precision,
  connections double precision,
  has_metrics boolean NOT NULL,
  body bytea NOT NULL
);
-- Already compressed: stored out of line without another compression attempt.
ALTER TABLE reports ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE INDEX reports_database ON reports (database_id, id);
CREATE INDEX reports_received_at ON reports (received_at);

CREATE TABLE agent_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  database_id uuid NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
  at timestamptz NOT NULL,
  level text NOT NULL,
  code text NOT NULL,
  message text NOT NULL,
  -- The command the event is about (a trial a guardrail reverted), when there is one.
  command_id text,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_events_database ON agent_events (database_id, id);
CREATE INDEX agent_events_received_at ON agent_events (received_at);

CREATE TABLE commands (
  id uuid PRIMARY KEY,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  database_id uuid NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
  -- The command exactly as the agent receives it (protocol v1 Command).
  body jsonb NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'sent', 'done')),
  created_by uuid REFERENCES users (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at timestamptz,
  sent_count integer NOT NULL DEFAULT 0,
  acked_at timestamptz,
  -- protocol v1 CommandAckRequest without its lease id.
  outcome jsonb
);
CREATE INDEX commands_database ON commands (database_id, seq);
CREATE INDEX commands_open ON commands (database_id, seq) WHERE status <> 'done';
`,
  },
  {
    version: 2,
    name: 'tuning sessions and their iterations',
    sql: `
CREATE TABLE tuning_sessions (
  id uuid PRIMARY KEY,
  database_id uuid NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
  state text NOT NULL CHECK (state IN ('baseline', 'iterating', 'awaiting_approval', 'applying_best', 'done', 'stopped', 'reverted', 'failed')),
  mode text NOT NULL CHECK (mode IN ('reload-only', 'restart')),
  iterations integer NOT NULL,
  window_seconds integer NOT NULL,
  warmup_seconds integer NOT NULL,
  seed bigint NOT NULL,
  require_approval boolean NOT NULL,
  -- What the search space is built from (target, mode, machine, settings) as at the start.
  space jsonb NOT NULL,
  created_by uuid REFERENCES users (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  ended_at timestamptz,
  message text,
  baseline_window jsonb,
  -- The baseline's query mix and window statistics, once measured.
  baseline jsonb,
  best jsonb,
  final_command_id uuid,
  final_sent_at timestamptz
);
-- One active session per database, whatever the number of replicas.
CREATE UNIQUE INDEX tuning_sessions_one_active ON tuning_sessions (database_id)
  WHERE state IN ('baseline', 'iterating', 'awaiting_approval', 'applying_best');
CREATE INDEX tuning_sessions_database ON tuning_sessions (database_id, created_at);

CREATE TABLE tuning_iterations (
  session_id uuid NOT NULL REFERENCES tuning_sessions (id) ON DELETE CASCADE,
  ordinal integer NOT NULL,
  kind text NOT NULL,
  config jsonb NOT NULL,
  reason text NOT NULL,
  predicted jsonb,
  command_id uuid NOT NULL,
  state text NOT NULL CHECK (state IN ('applying', 'measuring', 'ok', 'failed', 'cancelled')),
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at timestamptz,
  acked_at timestamptz,
  effective jsonb,
  measure_window jsonb,
  objective double precision,
  stats jsonb,
  reports integer,
  failure text,
  finished_at timestamptz,
  PRIMARY KEY (session_id, ordinal)
);

-- A session reads the reports of its measurement window, and the guardrail events of its trials.
CREATE INDEX reports_database_received_at ON reports (database_id, received_at);
CREATE INDEX agent_events_command ON agent_events (database_id, command_id) WHERE command_id IS NOT NULL;
`,
  },
  {
    version: 3,
    name: 'verified gains: interleaved baselines, A/B verification, contaminated windows',
    sql: `
-- A session verifies its best by A/B rounds before it recommends it (state verifying).
ALTER TABLE tuning_sessions DROP CONSTRAINT tuning_sessions_state_check;
ALTER TABLE tuning_sessions ADD CONSTRAINT tuning_sessions_state_check
  CHECK (state IN ('baseline', 'iterating', 'verifying', 'awaiting_approval', 'applying_best', 'done', 'stopped', 'reverted', 'failed'));
DROP INDEX tuning_sessions_one_active;
CREATE UNIQUE INDEX tuning_sessions_one_active ON tuning_sessions (database_id)
  WHERE state IN ('baseline', 'iterating', 'verifying', 'awaiting_approval', 'applying_best');
ALTER TABLE tuning_sessions ADD COLUMN ab_rounds_min integer NOT NULL DEFAULT 3;
ALTER TABLE tuning_sessions ADD COLUMN ab_rounds_max integer NOT NULL DEFAULT 8;
ALTER TABLE tuning_sessions ADD COLUMN min_effect_percent double precision NOT NULL DEFAULT 5;
ALTER TABLE tuning_sessions ADD COLUMN confidence_percent double precision NOT NULL DEFAULT 95;
-- The candidate and the rounds' verdict: intervals on runtime and throughput.
ALTER TABLE tuning_sessions ADD COLUMN verification jsonb;

-- Iterations are measurement windows: trials, baseline windows between them, and the A/B
-- rounds' windows; a window that could not be trusted is contaminated and measured again. The
-- objective column is no longer written: a trial's objective is judged, when read, against the
-- baseline windows nearest in time.
ALTER TABLE tuning_iterations DROP CONSTRAINT tuning_iterations_state_check;
ALTER TABLE tuning_iterations ADD CONSTRAINT tuning_iterations_state_check
  CHECK (state IN ('applying', 'measuring', 'ok', 'failed', 'cancelled', 'contaminated'));
ALTER TABLE tuning_iterations ADD COLUMN phase text NOT NULL DEFAULT 'search' CHECK (phase IN ('search', 'verify'));
ALTER TABLE tuning_iterations ADD COLUMN round integer;
`,
  },
  {
    version: 4,
    name: 'one word, one meaning: sessions are login_sessions (tuning sessions keep tuning_sessions)',
    sql: `
ALTER TABLE sessions RENAME TO login_sessions;
ALTER INDEX sessions_expires_at RENAME TO login_sessions_expires_at;
`,
  },
  {
    version: 5,
    name: 'commands expire: a trial not handed to the agent by its deadline is never delivered',
    sql: `
-- A trial's deadline (its session's window); NULL: none (reverts, people's commands). A pending
-- command past it is cancelled instead of delivered (sql-agents.ts).
ALTER TABLE commands ADD COLUMN deliver_by timestamptz;
`,
  },
  {
    version: 6,
    name: 'no hidden regressions: what a session does with a configuration that makes a statement slower',
    sql: `
-- approve: recommend it with the regression named, and wait for a person's approval;
-- refuse: do not recommend it.
ALTER TABLE tuning_sessions ADD COLUMN statement_regressions text NOT NULL DEFAULT 'approve'
  CHECK (statement_regressions IN ('approve', 'refuse'));
`,
  },
  {
    version: 7,
    name: 'the watch on kept configurations: its state per database, and the workload comparison',
    sql: `
-- One row per database whose kept configuration is watched (watch/): for the configuration kept
-- by session_id; a new kept configuration starts the row over.
CREATE TABLE watch_states (
  database_id uuid PRIMARY KEY REFERENCES databases (id) ON DELETE CASCADE,
  session_id uuid NOT NULL,
  state text NOT NULL CHECK (state IN ('measuring', 'holding', 'gone')),
  state_since timestamptz NOT NULL,
  runtime jsonb,
  judged_at timestamptz NOT NULL,
  workload_checked_at timestamptz,
  workload_changed_since timestamptz,
  workload jsonb
);
`,
  },
  {
    version: 8,
    name: 'verified steps, and windows as long as the measured noise needs',
    sql: `
-- Every early verification of a session (tuning/steps.ts), in order: what it verified, its
-- figures and what became of it (kept, waiting for approval, not verified, refused).
ALTER TABLE tuning_sessions ADD COLUMN steps jsonb NOT NULL DEFAULT '[]';
-- Windows from the noise the session measures (tuning/window-length.ts): window_seconds is the
-- longest a person allows, window_min_seconds the shortest (NULL: sessions from before, fixed),
-- window_now_seconds the length chosen once the noise of one window is measured.
ALTER TABLE tuning_sessions ADD COLUMN window_min_seconds integer;
ALTER TABLE tuning_sessions ADD COLUMN window_now_seconds integer;
-- Sessions started before the steps verify at the end only (a running one keeps its behaviour).
ALTER TABLE tuning_sessions ADD COLUMN verify_early boolean NOT NULL DEFAULT false;
-- The dashboard's throughput sparkline: statements/s from pg_stat_statements, which do not lag
-- as commits/s do (measure/throughput.ts).
ALTER TABLE reports ADD COLUMN statements_per_second double precision;
`,
  },
  {
    version: 9,
    name: 'the webhook outbox (one delivery per event across restarts and replicas) and the advice the fleet shows',
    sql: `
-- The webhook's outbox (notify/outbox.ts): an event is written here in the same transaction as
-- whatever raised it, and sent from here by whichever replica claims it. event_id is the id the
-- receiver sees (Tuner-Event-Id): a second insert of it is a no-op.
CREATE TABLE webhook_outbox (
  event_id uuid PRIMARY KEY,
  database_id uuid REFERENCES databases (id) ON DELETE CASCADE,
  kind text NOT NULL,
  -- Exactly the bytes sent and signed (text: jsonb would reorder the keys).
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  -- The bounds (maxTotalSeconds) count from here, so that a restart does not renew them.
  first_attempt_at timestamptz,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  -- A replica's claim while it makes an attempt; another may take the row once it has lapsed.
  claimed_by uuid,
  claimed_until timestamptz,
  -- A status or an error code, never the URL.
  last_error text,
  finished_at timestamptz
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at) WHERE state = 'pending';

-- The advice between sessions as last computed (advice/store.ts), one row per database, so that
-- the fleet's single statement can show "advice pending" without computing it.
CREATE TABLE database_advice (
  database_id uuid PRIMARY KEY REFERENCES databases (id) ON DELETE CASCADE,
  computed_at timestamptz NOT NULL,
  state text NOT NULL CHECK (state IN ('advice', 'nothing', 'session_active', 'no_reports', 'no_space')),
  findings text[] NOT NULL,
  parameters text[] NOT NULL,
  -- The newest report read: the next computation is due once a newer one arrives.
  reports_to timestamptz,
  -- Since when it argues for these findings (null unless state is 'advice').
  since timestamptz
);
`,
  },
];

/** Any constant would do; this one reads "tuner" in ASCII, so it is recognizable in pg_locks. */
export const MIGRATION_LOCK_KEY = 0x74756e6572;

/** Applies the migrations not applied yet, each in its own transaction, holding an advisory lock
 * so that replicas starting together apply each migration once. Returns the versions applied. */
export async function migrate(driver: SqlDriver, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  return driver.withAdvisoryLock(MIGRATION_LOCK_KEY, async (conn) => {
    await conn.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const rows = await conn.query<{ version: number }>('SELECT version FROM schema_migrations');
    const done = new Set(rows.map((r) => r.version));
    const newest = Math.max(0, ...done);
    const known = Math.max(0, ...migrations.map((m) => m.version));
    if (newest > known) {
      throw new Error(
        `the storage has schema version ${newest}, newer than this tuner-service knows (${known}): run a newer tuner-service`,
      );
    }
    const applied: number[] = [];
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(migration.version)) continue;
      await conn.transaction(async (tx) => {
        for (const statement of splitStatements(migration.sql)) await tx.query(statement);
        await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
      });
      applied.push(migration.version);
    }
    return applied;
  });
}

/** Migrations hold plain DDL: statements end with a semicolon at the end of a line. */
function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0);
}
