// Which statements the probe refuses before sending anything: only a single query that reads
// can be re-planned without risk. Everything else (utility statements and DDL, INSERT, UPDATE,
// DELETE, MERGE, a data-modifying WITH, SELECT … FOR UPDATE/SHARE, SELECT … INTO) is refused on
// its words alone; the read-only transaction the probe runs in would refuse a write anyway, but
// nothing that could write is ever sent. A word is read outside literals, quoted identifiers and
// comments (the redaction's lexer), so `'update'` or `/* delete */` refuse nothing, while an
// unquoted column named `update` refuses its statement: erring on the side of not planning.
import { statementTokens } from '../../postgres/statement-redaction.ts';

const READING_LEADS = new Set(['SELECT', 'WITH', 'VALUES', 'TABLE']);
const WRITING_WORDS = ['INSERT', 'UPDATE', 'DELETE', 'MERGE'] as const;
/** FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE, FOR KEY SHARE: row locks taken when it runs. */
const LOCKING_AFTER_FOR = new Set(['UPDATE', 'NO', 'SHARE', 'KEY']);

/** Why the probe will not plan `text`, or null when it may. */
export function planRefusal(text: string): string | null {
  const tokens = statementTokens(text.trim().replace(/;\s*$/, ''));
  if (tokens === null) return 'its text cannot be read with certainty (cut short, or ambiguous quoting)';
  const first = tokens[0];
  if (first === undefined) return 'its text is empty';
  if (first.kind === 'word' && (WRITING_WORDS as readonly string[]).includes(first.text)) return `an ${first.text} may write: not planned`;
  if (first.kind !== 'word' || !READING_LEADS.has(first.text)) {
    return `a utility statement (${first.kind === 'word' ? first.text : 'not a query'}): only queries that read (SELECT, WITH, VALUES, TABLE) are planned`;
  }
  if (tokens.some((t) => t.kind === 'other' && t.text === ';')) return 'its text holds more than one statement';
  const words = tokens.map((t) => (t.kind === 'word' ? t.text : ''));
  for (let i = 0; i < words.length; i++) {
    if (words[i] === 'FOR' && LOCKING_AFTER_FOR.has(words[i + 1] ?? '')) return 'SELECT … FOR UPDATE/SHARE locks rows: not planned';
  }
  const writing = WRITING_WORDS.find((w) => words.includes(w));
  if (writing) return `it names ${writing}: a statement that may write is not planned`;
  if (words.includes('INTO')) return 'SELECT … INTO creates a table: not planned';
  return null;
}

/** Commands PostgreSQL runs without a plan: no planner parameter changes how they run. Not here:
 * CREATE … AS, REFRESH, COPY (SELECT …), EXPLAIN and DECLARE, which plan a query. */
const PLANLESS_LEADS = new Set([
  'BEGIN',
  'START',
  'COMMIT',
  'END',
  'ROLLBACK',
  'ABORT',
  'SAVEPOINT',
  'RELEASE',
  'PREPARE',
  'SET',
  'RESET',
  'SHOW',
  'VACUUM',
  'ANALYZE',
  'CHECKPOINT',
  'LOCK',
  'LISTEN',
  'NOTIFY',
  'UNLISTEN',
  'DISCARD',
  'DEALLOCATE',
  'GRANT',
  'REVOKE',
  'ALTER',
  'DROP',
  'TRUNCATE',
  'COMMENT',
  'CREATE',
]);
/** Words after which a utility command plans a query after all (CREATE TABLE … AS SELECT). */
const QUERY_WORDS = new Set(['SELECT', 'VALUES', 'TABLE', 'WITH', 'EXECUTE']);

/** Whether `text` is a command PostgreSQL runs without a plan (DDL, transaction control, SET, …):
 * the planner has nothing to say about it, so a plan-aware session may leave it aside. */
export function isPlanless(text: string): boolean {
  const tokens = statementTokens(text.trim().replace(/;\s*$/, ''));
  const first = tokens?.[0];
  if (!tokens || first?.kind !== 'word' || !PLANLESS_LEADS.has(first.text)) return false;
  // PREPARE plans its statement; CREATE … AS SELECT runs a query.
  return first.text !== 'PREPARE' && !tokens.slice(1).some((t) => t.kind === 'word' && QUERY_WORDS.has(t.text));
}
