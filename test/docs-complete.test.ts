// Issue 46: the docs list every target, command and document the code has. docs/cli.md's tables
// are compared with the target registry and with `tuner-agent --help` (and --help with what the
// parser accepts); README's documentation list with docs/; the installer's next steps with the
// registry. Nothing here runs a cluster: it reads files and the CLI's own text.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { helpText, parseInvocation } from '../src/agent/process/cli.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { installScript } from '../src/service/http/downloads.ts';

const root = join(import.meta.dirname, '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const CLI_MD = read('docs/cli.md');
const HELP = helpText(TARGETS);

/** The text of a `## heading` section, up to the next `## `. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  assert.ok(start >= 0, `no section "## ${heading}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

/** The first cell of each row of the section's table, header and separator left out. */
function firstColumn(heading: string): string[] {
  const rows = section(CLI_MD, heading)
    .split('\n')
    .filter((l) => l.startsWith('| '));
  return rows.slice(2).map((row) => row.split(' | ')[0]!.slice(2).trim());
}

/** Every `--flag` in a text. */
function flagsIn(text: string): Set<string> {
  return new Set(text.match(/(?<![\w-])--[a-z][a-z-]*/g) ?? []);
}

/** The command words of the usage lines: `tuner-agent permissions ...`, `tuner-agent init ...`. */
function commandWords(usage: string): Set<string> {
  return new Set([...usage.matchAll(/^\s*tuner-agent ([a-z]+)\b/gm)].map((m) => m[1]!));
}

const sorted = (set: Iterable<string>) => [...set].sort();

test("docs/cli.md's targets table is the registry's kinds, in its order", () => {
  assert.deepEqual(
    firstColumn('Targets (exactly one)'),
    TARGETS.kinds.map((kind) => `\`--${kind}\``),
  );
});

test("docs/cli.md's commands table has permissions --<kind> for every kind of the registry, and no other", () => {
  const permissions = firstColumn('Commands')
    .filter((cell) => cell.startsWith('`permissions '))
    .map((cell) => cell.replaceAll('`', ''));
  assert.deepEqual(
    permissions,
    TARGETS.kinds.map((kind) => `permissions --${kind}`),
  );
});

test('every flag and command of --help is in docs/cli.md, and every one docs/cli.md lists is in --help', () => {
  const usage = /```\n([^`]*)```/.exec(CLI_MD)![1]!;
  const documented = [firstColumn('Targets (exactly one)'), firstColumn('Commands'), firstColumn('Options')].flat().join('\n');
  assert.deepEqual(sorted(flagsIn(`${usage}\n${documented}`)), sorted(flagsIn(HELP)));
  const documentedCommands = new Set([...commandWords(usage), ...[...documented.matchAll(/^`([a-z]+)\b/gm)].map((m) => m[1]!)]);
  assert.deepEqual(sorted(documentedCommands), sorted(commandWords(HELP)));
  assert.deepEqual(sorted(commandWords(HELP)), ['init', 'permissions', 'plans']);
});

test('every flag --help names is one the command line accepts (and an unknown one is refused)', () => {
  for (const flag of flagsIn(HELP)) {
    // A value after it, for the flags that take one; where it does not, it is a positional.
    let message = '';
    try {
      parseInvocation(['--local', flag, 'work_mem=1MB']);
    } catch (err) {
      message = (err as Error).message;
    }
    assert.doesNotMatch(message, /Unknown option/, flag);
  }
  assert.throws(() => parseInvocation(['--local', '--no-such-flag']), /Unknown option '--no-such-flag'/);
});

test("README's documentation list links every file in docs/", () => {
  const list = section(read('README.md'), 'Documentation');
  const linked = new Set([...list.matchAll(/\]\(docs\/([^)#]+\.md)\)/g)].map((m) => m[1]!));
  const docs = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md'));
  assert.deepEqual(
    docs.filter((f) => !linked.has(f)),
    [],
    'docs not in the list',
  );
  assert.deepEqual(
    [...linked].filter((f) => !docs.includes(f)),
    [],
    'links to docs that do not exist',
  );
});

test("the installer's next steps name every target", () => {
  // The list comes from the registry when the service serves the script: a new target is named without an edit here.
  const script = installScript('https://tuner.example.com') ?? '';
  const next = script.slice(script.indexOf('Next steps:'));
  assert.doesNotMatch(next, /__[A-Z_]+__/, 'a placeholder left in the served script');
  for (const kind of TARGETS.kinds) assert.match(next, new RegExp(`--${kind}\\b(?!-)`), `--${kind}`);
});
