// Real statements that carry a secret in a literal, in every quoting PostgreSQL reads, as
// pg_stat_statements keeps utility statements (and any text it stored without normalizing):
// each with what its redaction must be exactly, and the secrets that must appear nowhere. `runs`
// marks the ones test/redact-collect.test.ts executes in a real cluster (after REDACT_SETUP).

export interface CorpusStatement {
  sql: string;
  redacted: string;
  secrets: string[];
  runs?: boolean;
}

/** What the runnable statements need: roles, extensions, a foreign server, a publication's name. */
export const REDACT_SETUP = [
  'CREATE EXTENSION IF NOT EXISTS pgcrypto',
  'CREATE EXTENSION IF NOT EXISTS postgres_fdw',
  "CREATE SERVER fdw_srv FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', dbname 'postgres')",
  'CREATE ROLE agent_slash LOGIN',
  'CREATE ROLE r_quote LOGIN',
];

export const CORPUS: CorpusStatement[] = [
  {
    sql: "ALTER USER agent_slash PASSWORD 'k9/Fq+Zt=='",
    redacted: 'ALTER USER agent_slash PASSWORD $1',
    secrets: ['k9/Fq+Zt=='],
    runs: true,
  },
  {
    sql: "CREATE ROLE r_doubled LOGIN PASSWORD 'it''s-Secr3t-Doubled'",
    redacted: 'CREATE ROLE r_doubled LOGIN PASSWORD $1',
    secrets: ["it''s-Secr3t-Doubled", 'Secr3t-Doubled'],
    runs: true,
  },
  {
    sql: "ALTER ROLE r_quote WITH ENCRYPTED PASSWORD E'esc\\'aped\\\\Pw-Secret1'",
    redacted: 'ALTER ROLE r_quote WITH ENCRYPTED PASSWORD $1',
    secrets: ['aped\\\\Pw-Secret1', 'Pw-Secret1'],
    runs: true,
  },
  {
    sql: "ALTER ROLE r_quote PASSWORD U&'d\\0061t\\+000061-Unic0de-Pw'",
    redacted: 'ALTER ROLE r_quote PASSWORD $1',
    secrets: ['Unic0de-Pw'],
    runs: true,
  },
  {
    sql: 'ALTER ROLE r_quote PASSWORD $pw$Dollar\'Quoted"Pw-Secret2$pw$',
    redacted: 'ALTER ROLE r_quote PASSWORD $1',
    secrets: ['Pw-Secret2', "Dollar'Quoted"],
    runs: true,
  },
  {
    sql: 'ALTER ROLE r_quote PASSWORD $$plainDollarPw-3$$',
    redacted: 'ALTER ROLE r_quote PASSWORD $1',
    secrets: ['plainDollarPw-3'],
    runs: true,
  },
  {
    sql: "ALTER ROLE r_quote VALID UNTIL 'infinity' PASSWORD 'Tw0-Literals-Pw'",
    redacted: 'ALTER ROLE r_quote VALID UNTIL $1 PASSWORD $2',
    secrets: ['Tw0-Literals-Pw'],
    runs: true,
  },
  {
    sql: 'ALTER ROLE "odd""name" PASSWORD \'QuotedIdent-Pw4\'',
    redacted: 'ALTER ROLE "odd""name" PASSWORD $1',
    secrets: ['QuotedIdent-Pw4'],
  },
  {
    sql: "CREATE USER MAPPING FOR agent_slash SERVER fdw_srv OPTIONS (user 'remote_user', password 'MappingPw-77x')",
    redacted: 'CREATE USER MAPPING FOR agent_slash SERVER fdw_srv OPTIONS (user $1, password $2)',
    secrets: ['MappingPw-77x'],
    runs: true,
  },
  {
    sql: "ALTER USER MAPPING FOR agent_slash SERVER fdw_srv OPTIONS (SET password 'NewMapPw-88y')",
    redacted: 'ALTER USER MAPPING FOR agent_slash SERVER fdw_srv OPTIONS (SET password $1)',
    secrets: ['NewMapPw-88y'],
    runs: true,
  },
  {
    sql: "CREATE SUBSCRIPTION sub_redact CONNECTION 'host=10.0.0.5 dbname=app user=rep password=SubPw-9x' PUBLICATION pub1 WITH (connect = false)",
    redacted: 'CREATE SUBSCRIPTION sub_redact CONNECTION $1 PUBLICATION pub1 WITH (connect = false)',
    secrets: ['SubPw-9x', 'password=SubPw'],
    runs: true,
  },
  {
    sql: "SELECT dblink_connect('conn1', 'host=127.0.0.1 user=x password=DbLinkPw-42')",
    redacted: 'SELECT dblink_connect($1, $2)',
    secrets: ['DbLinkPw-42'],
  },
  {
    sql: "SELECT pgp_sym_encrypt('payload', 'SymKey-Secr3t')",
    redacted: 'SELECT pgp_sym_encrypt($1, $2)',
    secrets: ['SymKey-Secr3t'],
    runs: true,
  },
  {
    // A SELECT kept half normalized (pg_stat_statements stored the text without its constants' places).
    sql: "SELECT pgp_sym_decrypt($1, 'MixedKey-6z')",
    redacted: 'SELECT pgp_sym_decrypt($1, $2)',
    secrets: ['MixedKey-6z'],
  },
  {
    // A planned statement stored as typed (no $n at all): its numbers go too.
    sql: 'SELECT holder FROM cards WHERE number = 4111111111111111 AND cvv = 123 LIMIT 1',
    redacted: 'SELECT holder FROM cards WHERE number = $1 AND cvv = $2 LIMIT $3',
    secrets: ['4111111111111111', '123'],
  },
  {
    sql: "COPY zz_copy FROM PROGRAM 'curl -u admin:CurlPw-55 https://files.internal/data.csv' WITH (FORMAT csv)",
    redacted: 'COPY zz_copy FROM PROGRAM $1 WITH (FORMAT csv)',
    secrets: ['CurlPw-55'],
  },
  {
    sql: "SET app.api_key = 'SetKey-Quoted1'",
    redacted: 'SET app.api_key = $1',
    secrets: ['SetKey-Quoted1'],
    runs: true,
  },
  {
    sql: 'SET SESSION app.token TO SetKeyBare99',
    redacted: 'SET SESSION app.token TO $1',
    secrets: ['SetKeyBare99'],
    runs: true,
  },
  {
    sql: 'SET search_path = "SetKeyIdent77", other_word',
    redacted: 'SET search_path = $1, $2',
    secrets: ['SetKeyIdent77'],
    runs: true,
  },
  {
    sql: 'SET extra_float_digits = -2',
    redacted: 'SET extra_float_digits = -$1',
    secrets: [],
    runs: true,
  },
  {
    sql: "ALTER ROLE r_quote SET app.key TO 'RoleSetKey-3'",
    redacted: 'ALTER ROLE r_quote SET app.key TO $1',
    secrets: ['RoleSetKey-3'],
    runs: true,
  },
  {
    sql: "DO $body$ BEGIN EXECUTE 'ALTER ROLE r_quote PASSWORD ''DoBlockPw-8'''; END $body$",
    redacted: 'DO $1',
    secrets: ['DoBlockPw-8'],
    runs: true,
  },
  {
    sql: "/* outer /* inner 'not a string */ still a comment */ ALTER ROLE r_quote PASSWORD 'AfterComment-1'",
    redacted: '/* */ ALTER ROLE r_quote PASSWORD $1',
    secrets: ['AfterComment-1', 'still a comment'],
    runs: true,
  },
  {
    sql: "-- rotate the password\nALTER ROLE r_quote PASSWORD 'LineComment-2'",
    redacted: '--\nALTER ROLE r_quote PASSWORD $1',
    secrets: ['LineComment-2', 'rotate'],
  },
  {
    sql: '/* dsn postgresql://u:CommentPw-9@db/app */ SELECT $1',
    redacted: '/* */ SELECT $1',
    secrets: ['CommentPw-9'],
  },
  // Comments lose their content whatever it says: the hostile probe's three forms, whose words no
  // list of English keywords knows, and comments with no word at all beside the secret.
  {
    sql: "ALTER ROLE r_quote PASSWORD 'x' /* pw: S3cretF1-zzz */",
    redacted: 'ALTER ROLE r_quote PASSWORD $1 /* */',
    secrets: ['S3cretF1-zzz'],
    runs: true,
  },
  {
    sql: 'ALTER ROLE r_quote /* kennwort S3cretF2-zzz */ CONNECTION LIMIT 5',
    redacted: 'ALTER ROLE r_quote /* */ CONNECTION LIMIT 5',
    secrets: ['S3cretF2-zzz', 'kennwort'],
    runs: true,
  },
  {
    // Not run: pg_stat_statements keeps the first text of a queryid, and `SELECT 1` is common.
    sql: 'SELECT 1 /* pw S3cretF3-zzz */',
    redacted: 'SELECT $1 /* */',
    secrets: ['S3cretF3-zzz'],
  },
  {
    sql: "SELECT 'probe' AS keywordless_block /* Kq8vN2-xLw0pZ */",
    redacted: 'SELECT $1 AS keywordless_block /* */',
    secrets: ['Kq8vN2-xLw0pZ'],
    runs: true,
  },
  {
    sql: 'SELECT count(*) AS keywordless_line FROM pg_class -- Hp1Jo2Ki3-line',
    redacted: 'SELECT count(*) AS keywordless_line FROM pg_class --',
    secrets: ['Hp1Jo2Ki3-line'],
    runs: true,
  },
  {
    sql: "ALTER ROLE r_quote /* outer /* Zr7-nested-Q4 */ Wm5-after-nest */ VALID UNTIL 'infinity'",
    redacted: 'ALTER ROLE r_quote /* */ VALID UNTIL $1',
    secrets: ['Zr7-nested-Q4', 'Wm5-after-nest'],
    runs: true,
  },
  {
    // A sqlcommenter tag: its values are an application's (a route, a trace id), kept nowhere either.
    sql: "/*controller='orders',traceparent='00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01'*/ SELECT * FROM orders WHERE id = $1",
    redacted: '/* */ SELECT * FROM orders WHERE id = $1',
    secrets: ['5bd66ef5095369c7b0d1f8f4bd33716a', 'controller'],
  },
  {
    sql: "SELECT B'1010', X'DEADBEEF', N'national-Secret5'",
    redacted: 'SELECT $1, $2, $3',
    secrets: ['national-Secret5', 'DEADBEEF'],
  },
  {
    sql: "ALTER ROLE r_quote PASSWORD 'Unterminated-Pw3",
    redacted: 'ALTER ROLE',
    secrets: ['Unterminated-Pw3'],
  },
  {
    // Cut at the length limit inside a dollar quote.
    sql: "CREATE OR REPLACE FUNCTION f() RETURNS void AS $fn$ BEGIN PERFORM dblink_connect('password=CutShort-Pw7",
    redacted: 'CREATE OR REPLACE FUNCTION',
    secrets: ['CutShort-Pw7'],
  },
  {
    sql: "CREATE USER u_unterminated_ident PASSWORD 'x' IN ROLE \"never closed",
    redacted: 'CREATE USER',
    secrets: ['never closed'],
  },
  {
    // With standard_conforming_strings off, 'a\' would not end where it does with it on: the
    // two readings differ, so only the kind goes.
    sql: "ALTER ROLE r_quote PASSWORD 'a\\' PASSWORD 'Ambiguous-Pw5'",
    redacted: 'ALTER ROLE',
    secrets: ['Ambiguous-Pw5'],
  },
  {
    // A backslash that means the same either way.
    sql: "COPY zz_copy FROM 'C:\\data\\Backslash-Path6.csv'",
    redacted: 'COPY zz_copy FROM $1',
    secrets: ['Backslash-Path6'],
  },
];

/** Texts PostgreSQL normalized, their comments already empty: they come out exactly as they went in. */
export const NORMALIZED = [
  'SELECT abalance FROM pgbench_accounts WHERE aid = $1',
  'UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2',
  'INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)',
  'SELECT a$b, "it\'s ""quoted""", t.x::numeric(10,2), 1.5e-3 FROM t WHERE c = $3 AND d <> $12',
  '/* */ SELECT * FROM orders WHERE id = $1 --',
  'WITH x AS MATERIALIZED (SELECT $1 AS v) MERGE INTO t USING x ON t.v = x.v WHEN MATCHED THEN UPDATE SET v = x.v',
  'SELECT pg_sleep($1)',
  'BEGIN',
  'VACUUM ANALYZE pgbench_accounts',
];
