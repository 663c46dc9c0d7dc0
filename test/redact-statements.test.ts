// The one redaction of statement texts (src/postgres/statement-redaction.ts) over the corpus of
// real secret-bearing statements: each comes out exactly as expected with none of its secrets,
// texts PostgreSQL normalized come out unchanged, and redacting twice changes nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redactStatementText, statementKind } from '../src/postgres/statement-redaction.ts';
import { CORPUS, NORMALIZED } from './helpers/redact-corpus.ts';

test('every corpus statement is redacted exactly, and none of its secrets is left', () => {
  for (const { sql, redacted, secrets } of CORPUS) {
    const out = redactStatementText(sql);
    assert.equal(out, redacted, sql);
    for (const secret of secrets) assert.ok(!out.includes(secret), `${secret} left in ${out}`);
  }
});

test('texts PostgreSQL normalized come out unchanged', () => {
  for (const text of NORMALIZED) assert.equal(redactStatementText(text), text);
});

test('redaction is idempotent: the service redacts what the agent redacted without changing it', () => {
  for (const text of [...CORPUS.map((c) => c.sql), ...NORMALIZED]) {
    const once = redactStatementText(text);
    assert.equal(redactStatementText(once), once, text);
  }
});

test('new placeholders number after the ones a text has, and a UPDATE ... SET keeps its columns', () => {
  assert.equal(redactStatementText("SELECT f($2, 'k', $7, 'j')"), 'SELECT f($2, $8, $7, $9)');
  assert.equal(redactStatementText("UPDATE t SET c = other_col WHERE k = 'x'"), 'UPDATE t SET c = other_col WHERE k = $1');
});

test('a statement kind is its leading keywords only', () => {
  assert.equal(statementKind("CREATE USER MAPPING FOR u SERVER s OPTIONS (password 'x"), 'CREATE USER MAPPING');
  assert.equal(statementKind("alter user agent_user password 'x"), 'ALTER USER');
  assert.equal(statementKind("/* c */ SELECT 'x"), 'SELECT');
  assert.equal(statementKind("'just a string"), 'UNKNOWN');
});
