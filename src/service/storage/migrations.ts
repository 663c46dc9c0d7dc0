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
  {
    version: 10,
    name: 'organizations: the account becomes an organization of people, each with a role',
    sql: `
-- Each account becomes an organization with everything it held (databases, their keys, sessions,
-- commands); its user, who alone saw it, becomes its admin. Users created from now on join the
-- organization of the admin who adds them.
ALTER TABLE accounts RENAME TO organizations;
ALTER TABLE users RENAME COLUMN account_id TO organization_id;
ALTER TABLE databases RENAME COLUMN account_id TO organization_id;
ALTER INDEX databases_account RENAME TO databases_organization;
ALTER TABLE users ADD COLUMN role text NOT NULL DEFAULT 'admin' CHECK (role IN ('viewer', 'operator', 'admin'));
ALTER TABLE users ALTER COLUMN role DROP DEFAULT;
-- is_admin said who could create users (each in an account of their own): the role says it now.
ALTER TABLE users DROP COLUMN is_admin;
CREATE INDEX users_organization ON users (organization_id, created_at);
-- A user can be removed: what they made stays, without its maker.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_created_by_fkey;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE commands DROP CONSTRAINT commands_created_by_fkey;
ALTER TABLE commands ADD CONSTRAINT commands_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE tuning_sessions DROP CONSTRAINT tuning_sessions_created_by_fkey;
ALTER TABLE tuning_sessions ADD CONSTRAINT tuning_sessions_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL;
`,
  },
  {
    version: 11,
    name: 'the audit log: append-only, who did what, when, from where; login sessions say how they logged in',
    sql: `
ALTER TABLE login_sessions ADD COLUMN via text NOT NULL DEFAULT 'password' CHECK (via IN ('password', 'sso'));

-- Every action that changes something (audit/record.ts). No foreign keys: an entry outlives the
-- user, token or database it names.
CREATE TABLE audit_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  -- NULL for a refused login with a username nobody has.
  organization_id uuid,
  actor_kind text NOT NULL CHECK (actor_kind IN ('user', 'token', 'anonymous')),
  actor_id uuid,
  actor_name text NOT NULL,
  via text CHECK (via IN ('password', 'sso', 'token')),
  address text,
  database_id uuid,
  action text NOT NULL,
  details jsonb NOT NULL
);
CREATE INDEX audit_events_organization ON audit_events (organization_id, id);
CREATE INDEX audit_events_at ON audit_events (at);

-- Append-only in the storage too, whoever connects (PGlite runs as a superuser, so a trigger, not
-- REVOKE): an UPDATE or TRUNCATE is refused; a DELETE only of entries older than the retention
-- the deleting transaction declares (SET LOCAL tuner.audit_retention_days, as prune does).
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF TG_OP = 'DELETE' AND coalesce(current_setting('tuner.audit_retention_days', true), '') ~ '^[0-9]+$' AND OLD.at < now() - make_interval(days => current_setting('tuner.audit_retention_days')::int) THEN RETURN OLD; END IF; RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege'; END $$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
`,
  },
  {
    version: 12,
    name: 'API tokens for automation: a role in an organization, an expiry, only their hashes',
    sql: `
-- people/api-tokens.ts. A token acts on behalf of the admin who made it: removing them removes it.
CREATE TABLE api_tokens (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  name text NOT NULL,
  role text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  token_hash text NOT NULL UNIQUE,
  display_prefix text NOT NULL,
  created_by uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz,
  last_used_at timestamptz
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (organization_id, name) WHERE revoked_at IS NULL;
`,
  },
  {
    // 20, not 10: versions 10-19 are left to the organizations' migrations written at the same
    // time (issue 45), so that the two cannot collide; the runner applies any it has not applied.
    version: 20,
    name: 'fleet_indexes',
    // The fleet page's statement (sql-fleet.ts) at 10,000 databases: per database, the latest
    // session in the order it sorts them (no sort step), the ended sessions a kept configuration
    // may come from (most databases have none: found in the index alone), and advice that is
    // pending (most rows are not: no heap visit to refuse them). A fifth less of the statement's
    // CPU on PostgreSQL at 10,000 databases (bench/fleet.ts, docs/fleet.md).
    sql: `
CREATE INDEX tuning_sessions_latest ON tuning_sessions (database_id, created_at DESC, id DESC);
CREATE INDEX tuning_sessions_ended ON tuning_sessions (database_id) WHERE state IN ('done', 'stopped');
CREATE INDEX database_advice_pending ON database_advice (database_id) WHERE state = 'advice';
`,
  },
  {
    version: 21,
    name: 'single sign-on: a user linked to an OpenID provider by its issuer and subject',
    // people/sso.ts. The link is the provider's issuer and subject (sub), never the username: a
    // person the provider renames stays the same user. A user who logs in through SSO has no
    // password: its password_hash is a marker no password matches (people/passwords.ts).
    sql: `
ALTER TABLE users ADD COLUMN sso_issuer text, ADD COLUMN sso_subject text;
ALTER TABLE users ADD CONSTRAINT users_sso_link CHECK ((sso_issuer IS NULL) = (sso_subject IS NULL));
CREATE UNIQUE INDEX users_sso ON users (sso_issuer, sso_subject) WHERE sso_subject IS NOT NULL;
`,
  },
  {
    version: 22,
    name: 'login_failures',
    // The login throttle's counts (people/throttle.ts), in the storage rather than in each
    // replica's memory: behind a balancer, N replicas gave an attacker N times the attempts.
    sql: `
CREATE TABLE login_failures (
  key text PRIMARY KEY,
  failures integer NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX login_failures_expires_at ON login_failures (expires_at);
`,
  },
  {
    version: 23,
    name: 'plan-aware tuning: a session asks the planner before a trial goes live',
    sql: `
-- tuning/engine/planning.ts: a session that asks the agent's planner about each candidate first.
ALTER TABLE tuning_sessions ADD COLUMN plan_aware boolean NOT NULL DEFAULT false;
-- planning: its plan command is out; plan_neutral: skipped, it changes no heavy statement's plan;
-- refused: refused before it ran, a heavy statement's plan would regress.
ALTER TABLE tuning_iterations DROP CONSTRAINT tuning_iterations_state_check;
ALTER TABLE tuning_iterations ADD CONSTRAINT tuning_iterations_state_check
  CHECK (state IN ('planning', 'applying', 'measuring', 'ok', 'failed', 'cancelled', 'contaminated', 'plan_neutral', 'refused'));
-- What the planner said about the trial's candidate (IterationPlans in tuning/store.ts).
ALTER TABLE tuning_iterations ADD COLUMN plans jsonb;
`,
  },
  {
    version: 24,
    name: "an organization's webhooks; the outbox keeps one row per event and destination",
    // notify/actions.ts. The secret is kept as given: signing needs it (an HMAC key, not a
    // password). An outbox row with no webhook_id is for the service-wide webhook
    // (TUNER_WEBHOOK_URL), as every row was before; deleting a webhook drops its rows.
    sql: `
CREATE TABLE webhooks (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  url text NOT NULL,
  secret text NOT NULL,
  -- NULL: every kind of event; else the kinds it receives.
  events text[],
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_organization ON webhooks (organization_id, created_at);
ALTER TABLE webhook_outbox ADD COLUMN webhook_id uuid REFERENCES webhooks (id) ON DELETE CASCADE;
ALTER TABLE webhook_outbox ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_pkey;
ALTER TABLE webhook_outbox ADD PRIMARY KEY (id);
-- An event once per destination (a second write of it is a no-op); the nil uuid stands for the
-- service-wide webhook, as NULLs would not collide.
CREATE UNIQUE INDEX webhook_outbox_event_destination ON webhook_outbox (event_id, (coalesce(webhook_id, '00000000-0000-0000-0000-000000000000'::uuid)));
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
