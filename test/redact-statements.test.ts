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

/** A seeded generator (mulberry32): the same comments on every run, and a failure says its seed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Words a comment may hold besides its secret: keywords of many languages, none, and the
 * characters that start strings, dollar quotes, identifiers and comments elsewhere. */
const COMMENT_PIECES = [
  'pw',
  'kennwort',
  'mot de passe',
  'contraseña',
  '密码',
  'note',
  "'",
  "''",
  '"',
  '$$',
  '$x$',
  '--',
  '\\',
  '@',
  ':',
  "E'",
  '*',
  '/',
  ';',
];

function commentBody(next: () => number, secret: string, line: boolean, depth = 0): string {
  const pieces = [secret];
  const count = Math.floor(next() * 5);
  for (let i = 0; i < count; i++) {
    if (!line && depth < 2 && next() < 0.2) pieces.push(`/* ${commentBody(next, `${secret}n${depth}`, false, depth + 1)} */`);
    else pieces.push(COMMENT_PIECES[Math.floor(next() * COMMENT_PIECES.length)]!);
  }
  if (!line && next() < 0.3) pieces.push('\n');
  // Shuffled: the secret anywhere, alone or among words. Spaced so that `*` and `/` never meet.
  return pieces.sort(() => next() - 0.5).join(' ');
}

test('property: a comment anywhere between words loses its content, whatever it holds', () => {
  // The texts read to their end (a comment after an unterminated string would be inside it).
  const texts = [...CORPUS.filter((c) => c.redacted !== statementKind(c.sql)).map((c) => c.sql), ...NORMALIZED];
  for (let seed = 1; seed <= 400; seed++) {
    const next = random(seed);
    const text = texts[seed % texts.length]!;
    const secret = `Zq${seed}x${Math.floor(next() * 1e9).toString(36)}`;
    const line = next() < 0.3;
    const body = commentBody(next, secret, line);
    // Before the text, after it (a line comment ends the text), or after its first keyword (a
    // block comment only: a line comment there would comment out the rest of the line). Never
    // inside a line comment of the text: a newline in the block comment would end that one.
    const places = (['start', 'end', 'inside'] as const).filter(
      (p) => p === 'start' || (p === 'end' ? !text.includes('--') : /^[A-Za-z]+ /.test(text)),
    );
    const where = line ? 'end' : places[Math.floor(next() * places.length)]!;
    const place = (comment: string) =>
      where === 'start' ? `${comment} ${text}` : where === 'end' ? `${text} ${comment}` : text.replace(/^(\S+) /, `$1 ${comment} `);
    const commented = place(line ? `-- ${body}` : `/* ${body} */`);
    const out = redactStatementText(commented);
    assert.ok(!out.includes(secret), `seed ${seed}: ${secret} left in ${out} (from ${commented})`);
    // Nothing else changes: the same as the text with an empty comment there.
    assert.equal(out, redactStatementText(place(line ? '--' : '/* */')), `seed ${seed}: ${commented}`);
    assert.equal(redactStatementText(out), out, `seed ${seed}: idempotent`);
  }
});
