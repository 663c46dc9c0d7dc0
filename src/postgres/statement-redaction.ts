// Statement texts leave the host without their literals. pg_stat_statements replaces the
// constants of a planned statement (SELECT, INSERT, UPDATE, DELETE, MERGE) with $1, $2, ... but
// keeps utility statements as typed, and keeps any text it stored without parse analysis (an
// entry re-created at executor end) verbatim: `ALTER ROLE app PASSWORD 'secret'`,
// `CREATE USER MAPPING ... OPTIONS (password '...')`, `CREATE SUBSCRIPTION ... CONNECTION '...'`,
// `SELECT dblink_connect('... password=...')`, `SELECT pgp_sym_encrypt(data, 'key')`.
//
// So every string literal of every text is replaced by the next $n, as PostgreSQL does for planned
// statements: a text it normalized has none left and comes out unchanged. A small lexer finds the
// literals (a regex per statement kind would miss a quoting form): '...' with '' doubled, E'...'
// with backslash escapes, U&'...', N'...', B'...', X'...', $$...$$ and $tag$...$tag$; quoted
// identifiers "..." stay. Comments (-- and nested /* */) lose their content, whatever it says: a
// comment is free text, and no filter of its words can tell a secret (`/* pw: S3cret */`,
// `/* kennwort ... */`, a bare token) from a note. Besides literals, the one form that carries a secret without quotes: the values of
// `SET name = value` / `TO value` in utility statements (`SET app.api_key = abc123`); and a
// planned statement without a single $n was stored as typed, so its numbers go as well.
//
// A text that cannot be lexed (an unterminated string, or one cut short by the length limit) goes
// as its statement kind only (`ALTER ROLE`): where the lexer loses track, nothing after it is sure.
// Pure: the agent redacts where it builds a report, the service again before it stores and shows.

export type TokenKind = 'literal' | 'param' | 'word' | 'quoted' | 'number' | 'comment' | 'other';

interface Token {
  kind: TokenKind;
  start: number;
  end: number;
}

interface Lexed {
  tokens: Token[];
  /** False when the text ended inside a string, quoted identifier, or comment. */
  complete: boolean;
  /** A standard '...' string held a backslash: with standard_conforming_strings off it would be an
   * escape, and the string would end elsewhere. */
  ambiguous: boolean;
}

const isSpace = (c: number) => c === 32 || (c >= 9 && c <= 13);
const isDigit = (c: number) => c >= 48 && c <= 57;
/** First character of an identifier (and of a dollar-quote tag): a letter, `_`, or any non-ASCII. */
const isIdentStart = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c >= 128;
const isIdentPart = (c: number) => isIdentStart(c) || isDigit(c) || c === 36; /* $ */
const QUOTE = 39; // '
const DQUOTE = 34; // "
const BACKSLASH = 92;
const DOLLAR = 36;

/** The end of a '...' string whose opening quote is at `open` (past its closing quote), or -1. */
function endOfString(text: string, open: number, backslashEscapes: boolean): { end: number; backslash: boolean } {
  let backslash = false;
  for (let i = open + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) {
      backslash = true;
      if (backslashEscapes) i++;
    } else if (c === QUOTE) {
      if (text.charCodeAt(i + 1) === QUOTE) i++;
      else return { end: i + 1, backslash };
    }
  }
  return { end: -1, backslash };
}

/** The end of a "..." identifier whose opening quote is at `open`, or -1. */
function endOfQuotedIdentifier(text: string, open: number): number {
  for (let i = open + 1; i < text.length; i++) {
    if (text.charCodeAt(i) === DQUOTE) {
      if (text.charCodeAt(i + 1) === DQUOTE) i++;
      else return i + 1;
    }
  }
  return -1;
}

/** The end of a nested /* comment starting at `open`, or -1. */
function endOfBlockComment(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (c === 47 && next === 42) {
      depth++;
      i++;
    } else if (c === 42 && next === 47) {
      depth--;
      i++;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** `$tag$` (or `$$`) at `at`: the tag with its dollars, or null when `$` starts no dollar quote. */
function dollarTagAt(text: string, at: number): string | null {
  let i = at + 1;
  if (text.charCodeAt(i) === DOLLAR) return '$$';
  if (!isIdentStart(text.charCodeAt(i))) return null;
  while (i < text.length && isIdentPart(text.charCodeAt(i)) && text.charCodeAt(i) !== DOLLAR) i++;
  return text.charCodeAt(i) === DOLLAR ? text.slice(at, i + 1) : null;
}

function lex(text: string, backslashEscapes: boolean): Lexed {
  const tokens: Token[] = [];
  let ambiguous = false;
  const n = text.length;
  let i = 0;
  const push = (kind: TokenKind, start: number, end: number) => {
    tokens.push({ kind, start, end });
    i = end;
  };
  const string = (start: number, open: number, escapes: boolean): boolean => {
    const found = endOfString(text, open, escapes);
    if (found.end < 0) return false;
    if (found.backslash && !escapes) ambiguous = true;
    push('literal', start, found.end);
    return true;
  };
  while (i < n) {
    const c = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (isSpace(c)) {
      i++;
    } else if (c === 45 /* - */ && next === 45) {
      const newline = text.indexOf('\n', i);
      push('comment', i, newline < 0 ? n : newline);
    } else if (c === 47 /* / */ && next === 42 /* * */) {
      const end = endOfBlockComment(text, i);
      if (end < 0) return { tokens, complete: false, ambiguous };
      push('comment', i, end);
    } else if (c === QUOTE) {
      if (!string(i, i, backslashEscapes)) return { tokens, complete: false, ambiguous };
    } else if (c === DQUOTE) {
      const end = endOfQuotedIdentifier(text, i);
      if (end < 0) return { tokens, complete: false, ambiguous };
      push('quoted', i, end);
    } else if (c === DOLLAR) {
      if (isDigit(next)) {
        let end = i + 1;
        while (end < n && isDigit(text.charCodeAt(end))) end++;
        push('param', i, end);
        continue;
      }
      const tag = dollarTagAt(text, i);
      if (tag === null) {
        push('other', i, i + 1);
        continue;
      }
      const close = text.indexOf(tag, i + tag.length);
      if (close < 0) return { tokens, complete: false, ambiguous };
      push('literal', i, close + tag.length);
    } else if (isIdentStart(c)) {
      let end = i + 1;
      while (end < n && isIdentPart(text.charCodeAt(end))) end++;
      const word = end - i === 1 ? c | 32 : 0; // one letter, lower-cased: a string's prefix?
      const after = text.charCodeAt(end);
      if (after === QUOTE && (word === 101 /* e */ || word === 98 /* b */ || word === 120 /* x */ || word === 110) /* n */) {
        // E'...' always takes backslash escapes; B, X and N strings are standard strings.
        if (!string(i, end, word === 101 || backslashEscapes)) return { tokens, complete: false, ambiguous };
      } else if (word === 117 /* u */ && after === 38 /* & */ && text.charCodeAt(end + 1) === QUOTE) {
        if (!string(i, end + 1, backslashEscapes)) return { tokens, complete: false, ambiguous };
      } else if (word === 117 && after === 38 && text.charCodeAt(end + 1) === DQUOTE) {
        const close = endOfQuotedIdentifier(text, end + 1);
        if (close < 0) return { tokens, complete: false, ambiguous };
        push('quoted', i, close);
      } else {
        push('word', i, end);
      }
    } else if (isDigit(c) || (c === 46 /* . */ && isDigit(next))) {
      // 1.5, 0x1F, 1_000 (1e-3 reads as three tokens: no matter, none of them quotes anything).
      let end = i + 1;
      while (end < n && (isIdentPart(text.charCodeAt(end)) || text.charCodeAt(end) === 46) && text.charCodeAt(end) !== DOLLAR) end++;
      push('number', i, end);
    } else {
      push('other', i, i + 1);
    }
  }
  return { tokens, complete: true, ambiguous };
}

const upper = (text: string, t: Token) => text.slice(t.start, t.end).toUpperCase();

/** Words that may follow CREATE/ALTER/DROP in a statement's kind: modifiers and object types. */
const KIND_WORDS = new Set(
  (
    'OR REPLACE UNIQUE TEMP TEMPORARY UNLOGGED GLOBAL LOCAL MATERIALIZED FOREIGN DATA WRAPPER USER MAPPING ROLE GROUP ' +
    'TABLE INDEX VIEW FUNCTION PROCEDURE ROUTINE SERVER SUBSCRIPTION PUBLICATION EXTENSION DATABASE SCHEMA SEQUENCE ' +
    'TRIGGER TYPE DOMAIN POLICY RULE EVENT SYSTEM AGGREGATE OPERATOR COLLATION CONVERSION LANGUAGE TABLESPACE ' +
    'STATISTICS TEXT SEARCH CONFIGURATION DICTIONARY PARSER TEMPLATE ACCESS METHOD CAST TRANSFORM DEFAULT PRIVILEGES ' +
    'LARGE OBJECT OWNED'
  ).split(' '),
);
const KIND_LEADS = new Set(['CREATE', 'ALTER', 'DROP']);

/** What a text is, in its leading keywords only (`ALTER ROLE`, `CREATE USER MAPPING`, `SELECT`). */
export function statementKind(text: string): string {
  const words = lex(text, false).tokens.filter((t) => t.kind !== 'comment');
  const first = words[0];
  if (first?.kind !== 'word') return 'UNKNOWN';
  const kind = [upper(text, first)];
  if (KIND_LEADS.has(kind[0]!)) {
    for (const t of words.slice(1, 5)) {
      const word = t.kind === 'word' ? upper(text, t) : '';
      if (!KIND_WORDS.has(word)) break;
      kind.push(word);
    }
  }
  return kind.join(' ');
}

/** A text's tokens outside comments, as the redaction reads them (words upper-cased), or null when
 * it cannot be read with certainty (unterminated, or a backslash whose meaning depends on
 * standard_conforming_strings): for callers that must tell what a statement does before sending it. */
export function statementTokens(text: string): { kind: TokenKind; text: string }[] | null {
  const lexed = lex(text, false);
  if (!lexed.complete || lexed.ambiguous) return null;
  return lexed.tokens
    .filter((t) => t.kind !== 'comment')
    .map((t) => ({ kind: t.kind, text: t.kind === 'word' ? upper(text, t) : text.slice(t.start, t.end) }));
}

/** Statements whose `SET name = value` clauses set server parameters (not UPDATE's columns). */
const SETTING_STATEMENTS = new Set(['SET', 'ALTER', 'CREATE']);
/** Indexes of the value tokens of every `SET name = value[, value...]` / `SET name TO value`. */
function settingValues(text: string, tokens: readonly Token[]): Set<number> {
  const values = new Set<number>();
  const is = (k: number, word: string) => tokens[k]?.kind === 'word' && upper(text, tokens[k]) === word;
  const isOther = (k: number, ch: string) => tokens[k]?.kind === 'other' && text[tokens[k].start] === ch;
  const isName = (k: number) => tokens[k]?.kind === 'word' || tokens[k]?.kind === 'quoted';
  for (let k = 0; k < tokens.length; k++) {
    if (!is(k, 'SET')) continue;
    let j = k + 1;
    if (is(j, 'SESSION') || is(j, 'LOCAL')) j++;
    if (!isName(j)) continue;
    j++;
    while (isOther(j, '.') && isName(j + 1)) j += 2;
    if (!(isOther(j, '=') || is(j, 'TO'))) continue;
    j++;
    for (;;) {
      if (isOther(j, '-') || isOther(j, '+')) j++;
      const value = tokens[j];
      if (!value || !['word', 'quoted', 'number', 'literal'].includes(value.kind)) break;
      values.add(j);
      if (!isOther(j + 1, ',')) break;
      j += 2;
    }
    k = j;
  }
  return values;
}

/** Statements PostgreSQL plans, and normalizes: one without a single $n was stored as typed. */
const PLANNED_STATEMENTS = new Set(['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'MERGE', 'WITH', 'VALUES', 'TABLE']);

function render(text: string, tokens: readonly Token[]): string {
  let next = 1;
  for (const t of tokens) if (t.kind === 'param') next = Math.max(next, Number(text.slice(t.start + 1, t.end)) + 1);
  const first = tokens.find((t) => t.kind !== 'comment');
  const kind = first?.kind === 'word' ? upper(text, first) : '';
  const setValues = SETTING_STATEMENTS.has(kind) ? settingValues(text, tokens) : new Set<number>();
  // A planned statement kept verbatim (no $n at all) loses its numbers too, as normalizing would.
  const numbers = next === 1 && PLANNED_STATEMENTS.has(kind);
  let out = '';
  let from = 0;
  tokens.forEach((t, k) => {
    let replacement: string | null = null;
    if (t.kind === 'literal' || setValues.has(k) || (numbers && t.kind === 'number')) replacement = `$${next++}`;
    // A comment stays a comment (where it was, so the text reads as before), without its content.
    else if (t.kind === 'comment') replacement = text.startsWith('--', t.start) ? '--' : '/* */';
    if (replacement === null) return;
    out += text.slice(from, t.start) + replacement;
    from = t.end;
  });
  return from === 0 ? text : out + text.slice(from);
}

const SETTING_LEAD = /^\s*(?:set|alter|create)\b/i;

/** False when `text` can hold nothing to redact: no quote, no dollar quote, no comment, no SET
 * clause, and digits only beside a $n. Most texts PostgreSQL normalized are such, and skip the lexer. */
function mayHoldSecrets(text: string): boolean {
  let params = false;
  let digits = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (c === QUOTE || (c === DOLLAR && !isDigit(next)) || (c === 45 && next === 45) || (c === 47 && next === 42)) return true;
    if (c === DOLLAR) params = true;
    else if (isDigit(c)) digits = true;
  }
  return (digits && !params) || SETTING_LEAD.test(text);
}

/** A statement text with every literal (and SET value) replaced by $n and every comment emptied, or
 * its kind alone when it cannot be lexed with certainty. Texts PostgreSQL normalized (without
 * comments) come back unchanged. */
export function redactStatementText(text: string): string {
  if (!mayHoldSecrets(text)) return text;
  const standard = lex(text, false);
  if (!standard.complete) return statementKind(text);
  const redacted = render(text, standard.tokens);
  if (!standard.ambiguous) return redacted;
  // Read with standard_conforming_strings off, the literals would end elsewhere: only a text that
  // comes out the same both ways is sure.
  const escaped = lex(text, true);
  return escaped.complete && render(text, escaped.tokens) === redacted ? redacted : statementKind(text);
}
