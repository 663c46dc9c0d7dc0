// The setup page's container commands work as written (issue 46): read as a shell reads them, the
// `--local` command shares the host's network (`--network host`), so `localhost` in its URL is the
// host and not the container; Docker Desktop's way (host.docker.internal) is said beside it. The
// URL is then tried from the network namespace that command uses (this host's) against a real
// server. The cloud targets' commands name their database by its own name and keep Docker's default
// network.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { agentConnectionContext } from '../src/agent/process/db-tls.ts';
import { connectDb } from '../src/agent/database/db.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { AGENT_USER_PASSWORD_FOR_TESTS, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { setupSnippets } from '../src/service/setup/snippets.ts';

const INPUT = {
  databaseId: '6f1c1a52-8a3e-4c1d-9d2a-0c5b7f0e9a11',
  apiKey: null,
  serverUrl: 'https://tuner.example.com',
  agentImage: 'registry.example.com/tuner-agent:latest',
  installScriptUrl: 'https://tuner.example.com/install.sh',
};

/** The commands of a POSIX shell script as argument lists: comments dropped, a backslash-newline
 * joins lines, single quotes and backslashes quote as the shell reads them. */
function shellCommands(script: string): string[][] {
  const commands: string[][] = [];
  let args: string[] = [];
  let word: string | null = null;
  let i = 0;
  const endWord = () => {
    if (word !== null) args.push(word);
    word = null;
  };
  while (i < script.length) {
    const c = script[i]!;
    if (c === '\\' && script[i + 1] === '\n') {
      i += 2;
    } else if (c === '\\') {
      word = (word ?? '') + script[i + 1];
      i += 2;
    } else if (c === "'") {
      const end = script.indexOf("'", i + 1);
      assert.ok(end > i, 'a single quote is closed');
      word = (word ?? '') + script.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      assert.fail('the commands use single quotes only');
    } else if (c === '#' && word === null) {
      i = script.indexOf('\n', i) === -1 ? script.length : script.indexOf('\n', i);
    } else if (c === '\n' || c === ';') {
      endWord();
      if (args.length > 0) commands.push(args);
      args = [];
      i++;
    } else if (c === ' ' || c === '\t') {
      endWord();
      i++;
    } else {
      word = (word ?? '') + c;
      i++;
    }
  }
  endWord();
  if (args.length > 0) commands.push(args);
  return commands;
}

/** docker run's options as pairs (`-e NAME=value`, `--network host`), and the image's arguments. */
function dockerRun(argv: string[]): { options: Array<[string, string | null]>; image: string; args: string[] } {
  assert.deepEqual(argv.slice(0, 2), ['docker', 'run']);
  const flagsAlone = new Set(['-d', '--detach', '--rm']);
  const options: Array<[string, string | null]> = [];
  let i = 2;
  while (argv[i]!.startsWith('-')) {
    const option = argv[i]!;
    if (flagsAlone.has(option) || option.includes('=')) {
      options.push([option, null]);
      i++;
    } else {
      options.push([option, argv[i + 1]!]);
      i += 2;
    }
  }
  return { options, image: argv[i]!, args: argv.slice(i + 1) };
}

function connectionUrl(run: ReturnType<typeof dockerRun>): string {
  const env = run.options.filter(([o]) => o === '-e').map(([, v]) => v!);
  const url = env.find((e) => e.startsWith('AGENT_POSTGRESQL_CONNECTION_URL='));
  assert.ok(url, 'the command sets AGENT_POSTGRESQL_CONNECTION_URL');
  return url.slice('AGENT_POSTGRESQL_CONNECTION_URL='.length);
}

let cluster: Cluster;
before(async () => {
  cluster = await startCluster();
});
after(async () => {
  await cluster?.destroy();
});

test('the --local container command shares the host network, so localhost in its URL reaches a server on the host', async () => {
  const { containerCommand } = setupSnippets({ ...INPUT, target: 'local' });
  const commands = shellCommands(containerCommand);
  assert.equal(commands.length, 1, 'one command; the rest are comments');
  const run = dockerRun(commands[0]!);
  assert.deepEqual(
    run.options.filter(([o]) => o === '--network'),
    [['--network', 'host']],
  );
  assert.equal(run.image, INPUT.agentImage);
  assert.deepEqual(run.args, ['--local']);
  const url = new URL(connectionUrl(run));
  assert.equal(url.hostname, 'localhost');
  // Docker Desktop has no host network for containers: its way is said beside the command.
  assert.match(containerCommand, /^# .*--add-host=host\.docker\.internal:host-gateway/m);
  assert.match(containerCommand, /host\.docker\.internal in place of localhost/);

  // --network host: the container's namespace is this host's. The URL as the operator fills it
  // in (the password; the port where this test's server listens) connects as the agent would.
  url.password = AGENT_USER_PASSWORD_FOR_TESTS;
  url.port = String(cluster.port);
  const db = await connectDb(url.toString(), { connection: await agentConnectionContext('local') });
  try {
    const [row] = await db.query<{ user: string }>('SELECT current_user AS user');
    assert.equal(row?.user, 'agent_user');
  } finally {
    await db.close();
  }
});

test('a database elsewhere keeps the default network: the cloud targets name their server', () => {
  for (const target of TARGETS.kinds.filter((k) => k !== 'local')) {
    const { containerCommand } = setupSnippets({ ...INPUT, target });
    const commands = shellCommands(containerCommand);
    assert.equal(commands.length, 1, target);
    const run = dockerRun(commands[0]!);
    assert.deepEqual(
      run.options.filter(([o]) => o === '--network'),
      [],
      target,
    );
    // A placeholder such as <INSTANCE_ENDPOINT> is no URL yet: the host as the URL's text has it.
    assert.doesNotMatch(connectionUrl(run), /@(localhost|127\.0\.0\.1)[:/]/, target);
    assert.deepEqual(run.args, [`--${target}`]);
  }
});
