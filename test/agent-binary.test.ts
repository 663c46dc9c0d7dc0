// The single-file tuner-agent as operators get it, with no Node on the host's PATH: installed by
// the tuning service's /install.sh under dash (curl or wget, SHA-256 checked against the build's
// SHA256SUMS), set up as two instances by `tuner-agent init`, and run from the container image's
// root filesystem as the image's user with only environment variables, then with an agent.yaml
// mounted at /etc/tuner-agent/agent.yaml. (e2e-agent-service.test.ts
// runs the end-to-end agent test against the same binary.)
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pkg from '../package.json' with { type: 'json' };
import { buildImage, IMAGE } from '../scripts/build-image.ts';
import YAML from 'yaml';
import { SYSTEM_CONFIG_FILE } from '../src/agent/config/location.ts';
import { LEASE_FILE_NAME } from '../src/agent/process/loop.ts';
import type { Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster } from './helpers/agent-cluster.ts';
import { parseSums } from '../src/service/setup/downloads.ts';
import { pathWithoutNode, runAgent } from './helpers/agent-process.ts';
import { TEST_BINARY, skipWithoutBinary, skipWithoutTools } from './helpers/agent-binary.ts';
import {
  ADMIN_PASSWORD,
  PersonClient,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type TestService,
} from './helpers/service.ts';
import { until } from './helpers/until.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
interface CommandView {
  id: string;
  state: string;
  outcome: { status: string; effective: Record<string, string>; errors: string[] } | null;
}
interface LatestReport {
  report: { settings: { name: string; setting: string }[] } | null;
}

function exec(file: string, args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { ...options, timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
const dirs: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), `tuner-bin-${prefix}-`));
  dirs.push(dir);
  return dir;
};

/** A running agent; its output is kept for the failure message. */
function startAgent(file: string, args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  const child: ChildProcess = spawn(file, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
  return { child, exited, output: () => output };
}
const agents: ReturnType<typeof startAgent>[] = [];

const skip = skipWithoutTools('dash', 'wget', 'curl', 'umoci', 'unshare');
let store: ServiceStore;
let service: TestService;
let person: PersonClient;
let downloads: string;
let clusters: Cluster[] = [];

before(async () => {
  if (skip) return;
  // The build as the service serves it: the binary and its line of SHA256SUMS, as written by the build.
  const built = parseSums(readFileSync(join(dirname(TEST_BINARY!), 'SHA256SUMS'), 'utf8')).find((b) => b.file === basename(TEST_BINARY!));
  assert.ok(built, `the build's SHA256SUMS names ${basename(TEST_BINARY!)}`);
  downloads = tempDir('downloads');
  copyFileSync(TEST_BINARY!, join(downloads, built.file));
  writeFileSync(join(downloads, 'SHA256SUMS'), `${built.sha256}  ${built.file}\n`);

  [store, ...clusters] = await Promise.all([createServiceStore('pglite'), startAgentCluster(), startAgentCluster()]);
  service = await startTestService(store, { TUNER_DOWNLOADS_DIR: downloads });
  person = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
});

after(async () => {
  for (const agent of agents) agent.child.kill('SIGKILL');
  await service?.close();
  await store?.dispose();
  await Promise.all(clusters.map((c) => c.destroy()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A database on the service reporting every second: its id and API key. */
async function newDatabase(name: string): Promise<{ databaseId: string; apiKey: string }> {
  const created = await person.createDatabase(name, 'local');
  assert.equal(
    (await person.post(`/api/manage/databases/${created.databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status,
    200,
  );
  return created;
}

const latestSettings = async (databaseId: string) =>
  (await person.get<LatestReport>(`/api/manage/databases/${databaseId}/reports/latest`)).body.report?.settings ?? null;

test('the binary needs no Node: --version and --help with a PATH that holds none', { skip: skipWithoutBinary }, async () => {
  const cwd = tempDir('plain');
  const version = await runAgent(['--version'], { cwd, binary: TEST_BINARY });
  assert.equal(version.code, 0, version.stderr);
  assert.equal(version.stdout, `tuner-agent ${pkg.version}\n`);
  assert.ok(
    !pathWithoutNode()
      .split(':')
      .some((d) => existsSync(join(d, 'node'))),
  );
  const help = await runAgent(['--help'], { cwd, binary: TEST_BINARY });
  assert.match(help.stdout, /tuner-agent init DIR <target>/);
});

describe('install.sh, as the setup page gives it, under dash', { skip }, () => {
  let script: string;
  const hostTools = ['uname', 'sha256sum', 'cut', 'awk', 'chmod', 'mv', 'rm', 'cat'];

  /** A PATH of only the tools the installer may use (no Node); uname answers as told. */
  function tools(options: { fetcher: 'curl' | 'wget'; uname?: { s: string; m: string } }): string {
    const dir = tempDir('tools');
    for (const tool of [...hostTools, options.fetcher]) {
      if (tool === 'uname' && options.uname) continue;
      symlinkSync(`/usr/bin/${tool}`, join(dir, tool));
    }
    if (options.uname) {
      writeFileSync(join(dir, 'uname'), `#!/bin/sh\ncase "$1" in -s) echo '${options.uname.s}' ;; -m) echo '${options.uname.m}' ;; esac\n`);
      chmodSync(join(dir, 'uname'), 0o755);
    }
    return dir;
  }

  /** Runs the installer in a new empty directory, with HOME and TMPDIR elsewhere and watched. */
  async function install(path: string): Promise<Run & { cwd: string; home: string }> {
    const cwd = tempDir('install');
    const home = tempDir('home');
    const run = await exec('/usr/bin/dash', [script], { cwd, env: { PATH: path, HOME: home, TMPDIR: home } });
    return { ...run, cwd, home };
  }

  before(async () => {
    // The spec's one-liner, the first half: curl {install_script_url} > /tmp/agent-installer.sh
    const response = await fetch(`${service.url}/install.sh`);
    assert.equal(response.status, 200);
    script = join(tempDir('script'), 'agent-installer.sh');
    writeFileSync(script, await response.text());
  });

  for (const fetcher of ['curl', 'wget'] as const) {
    test(`with ${fetcher}: a working ./tuner-agent in the current directory, and nothing written elsewhere`, async () => {
      const run = await install(tools({ fetcher }));
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(readdirSync(run.cwd), ['tuner-agent']);
      assert.deepEqual(readdirSync(run.home), [], 'nothing in HOME or TMPDIR');
      const installed = join(run.cwd, 'tuner-agent');
      assert.equal(statSync(installed).mode & 0o777, 0o755);
      assert.equal(sha256(installed), sha256(TEST_BINARY!));
      assert.match(run.stdout, new RegExp(`installed \\./tuner-agent \\(tuner-agent ${pkg.version.replaceAll('.', '\\.')}, linux-`));
      assert.match(run.stdout, /agent\.yaml/);
      assert.match(run.stdout, /\.\/tuner-agent --managed-a --check/);
      assert.match(run.stdout, /Ctrl\+A then D/);
      const version = await exec(installed, ['--version'], { cwd: run.cwd, env: { PATH: pathWithoutNode() } });
      assert.equal(version.stdout, `tuner-agent ${pkg.version}\n`);
    });
  }

  test('an unsupported system or processor is told so, and nothing is written', async () => {
    const cases = [
      { uname: { s: 'FreeBSD', m: 'amd64' }, says: /this system \(FreeBSD\) has no tuner-agent binary; run the agent as a container/ },
      { uname: { s: 'Linux', m: 'riscv64' }, says: /this processor \(riscv64\) has no tuner-agent binary; run the agent as a container/ },
      {
        uname: { s: 'Darwin', m: 'x86_64' },
        says: new RegExp(
          `the tuning service has no tuner-agent for darwin-x64 \\(it offers: linux-${process.arch} \\); run the agent as a container`,
        ),
      },
    ];
    for (const c of cases) {
      const run = await install(tools({ fetcher: 'curl', uname: c.uname }));
      assert.equal(run.code, 1, `${c.uname.s} ${c.uname.m}: ${run.stdout}`);
      assert.match(run.stderr, c.says);
      assert.deepEqual(readdirSync(run.cwd), []);
    }
  });

  // Last: it changes the served binary. The service serves SHA256SUMS as the build wrote it, so a
  // binary changed afterwards no longer matches, and the installer refuses it.
  test('a binary that does not match SHA256SUMS is refused and deleted', async () => {
    appendFileSync(join(downloads, basename(TEST_BINARY!)), Buffer.from([0]));
    const run = await install(tools({ fetcher: 'curl' }));
    assert.equal(run.code, 1, run.stdout);
    assert.match(
      run.stderr,
      /the download does not match SHA256SUMS \(expected [0-9a-f]{64}, got [0-9a-f]{64}\): deleted it, nothing was installed/,
    );
    assert.deepEqual(readdirSync(run.cwd), []);
  });
});

test('two instances on one host: init makes a directory each, and each agent reports for its own database', { skip }, async () => {
  const host = tempDir('host');
  const instances = [];
  for (const [i, cluster] of clusters.entries()) {
    // Something to tell the two databases apart by, in their reports.
    await cluster.sql(`ALTER SYSTEM SET work_mem = '${5 + i}MB'`);
    await cluster.sql('SELECT pg_reload_conf()');
    const init = await exec(TEST_BINARY!, ['init', `db-${i}`, '--local'], { cwd: host, env: { PATH: pathWithoutNode() } });
    assert.equal(init.code, 0, init.stderr);
    const dir = join(host, `db-${i}`);
    assert.deepEqual(readdirSync(dir).sort(), ['agent.yaml', 'tuner-agent']);
    assert.equal(sha256(join(dir, 'tuner-agent')), sha256(TEST_BINARY!), 'its own copy of the binary');
    assert.equal(statSync(join(dir, 'agent.yaml')).mode & 0o777, 0o600);
    const { databaseId, apiKey } = await newDatabase(`instance ${i}`);
    // The operator fills in the template's placeholders.
    const template = readFileSync(join(dir, 'agent.yaml'), 'utf8');
    const filled = template
      .replace(/^(\s*connection_url:) .*$/m, `$1 ${cluster.agentUrl}`)
      .replace('<SERVER_URL>', service.url)
      .replace('<API_KEY>', apiKey)
      .replace('<DATABASE_ID>', databaseId);
    assert.ok(!/^\s*[a-z_]+: .*<[A-Z_]+>/m.test(filled), `every placeholder of a required key filled:\n${filled}`);
    writeFileSync(join(dir, 'agent.yaml'), filled);
    instances.push({ dir, databaseId, workMem: String((5 + i) * 1024) });
  }
  const running = instances.map((i) => startAgent('./tuner-agent', ['--local'], { cwd: i.dir, env: { PATH: pathWithoutNode() } }));
  agents.push(...running);
  for (const [n, instance] of instances.entries()) {
    const settings = await until(`a report from instance ${n}`, () => latestSettings(instance.databaseId), 60_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${running[n]!.output()}`);
    });
    assert.equal(settings.find((s) => s.name === 'work_mem')?.setting, instance.workMem, 'the report is of its own database');
    // Its lease (and, once it changes something, its journal) stays in its own directory.
    const lease = JSON.parse(readFileSync(join(instance.dir, LEASE_FILE_NAME), 'utf8')) as { databaseId: string };
    assert.equal(lease.databaseId, instance.databaseId);
  }
  for (const agent of running) agent.child.kill('SIGTERM');
  assert.deepEqual(await Promise.all(running.map((a) => a.exited)), [0, 0]);
});

// Unpacking an image with its owners and changing root need root, as a container engine does.
const skipImage = skip || (process.getuid?.() === 0 ? false : 'needs root (umoci unpack, chroot)');

test(
  'the container image: run from its root filesystem as its user, configured by the environment alone, then by a mounted agent.yaml',
  { skip: skipImage },
  async () => {
    const work = tempDir('image');
    const layout = join(work, 'layout');
    buildImage(TEST_BINARY!, layout);
    const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: { annotations: Record<string, string> }[] };
    assert.deepEqual(index.manifests.map((m) => m.annotations['org.opencontainers.image.ref.name']).sort(), [pkg.version, 'latest'].sort());

    // What a container engine would do: unpack the image, then run its process as its config says.
    const bundle = join(work, 'bundle');
    await exec('umoci', ['unpack', '--image', `${layout}:latest`, bundle], { cwd: work, env: { PATH: process.env['PATH'] ?? '' } });
    const spec = JSON.parse(readFileSync(join(bundle, 'config.json'), 'utf8')) as {
      process: { user: { uid: number; gid: number }; args: string[]; cwd: string; env: string[] };
    };
    const rootfs = join(bundle, 'rootfs');
    assert.notEqual(spec.process.user.uid, 0, 'not root');
    assert.deepEqual(spec.process.args, ['tuner-agent']);
    assert.equal(spec.process.cwd, IMAGE.stateDir);
    assert.ok(!spec.process.env.some((e) => e.startsWith('AGENT_')), 'no configuration baked in');
    assert.ok(existsSync(join(rootfs, 'etc/ssl/certs/ca-certificates.crt')));
    assert.ok(!existsSync(join(rootfs, IMAGE.stateDir, 'agent.yaml')));
    assert.ok(!existsSync(join(rootfs, 'bin/sh')) && !existsSync(join(rootfs, 'usr/bin')), 'nothing but the agent and what it links');

    const { databaseId, apiKey } = await newDatabase('container');
    const cluster = clusters[0]!;
    const env = Object.fromEntries([
      ...spec.process.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
      ['AGENT_POSTGRESQL_CONNECTION_URL', cluster.agentUrl],
      ['AGENT_TUNER_SERVER_URL', service.url],
      ['AGENT_TUNER_API_KEY', apiKey],
      ['AGENT_TUNER_DATABASE_ID', databaseId],
    ]) as NodeJS.ProcessEnv;
    // chroot into the root filesystem, in its working directory, as its user: `docker run <image> --local`.
    const { uid, gid } = spec.process.user;
    const chroot = [
      '--root',
      rootfs,
      '--wd',
      spec.process.cwd,
      '--setuid',
      String(uid),
      '--setgid',
      String(gid),
      ...spec.process.args,
      '--local',
    ];
    const agent = startAgent('/usr/bin/unshare', chroot, { cwd: work, env });
    agents.push(agent);

    await until('a report from the container', () => latestSettings(databaseId), 60_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${agent.output()}`);
    });
    const issued = await person.post<{ command: CommandView }>(`/api/manage/databases/${databaseId}/commands`, {
      kind: 'apply',
      values: { work_mem: '12MB' },
      keep: true,
    });
    assert.equal(issued.status, 201);
    const done = await until(
      'the command to be acknowledged',
      async () => {
        const list = (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`)).body.commands;
        return list.find((c) => c.id === issued.body.command.id && c.outcome) ?? null;
      },
      60_000,
    );
    assert.equal(done.state, 'applied', JSON.stringify(done.outcome));
    assert.equal(done.outcome?.effective['work_mem'], '12288');
    const [row] = await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`);
    assert.equal(row?.setting, '12288');

    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0, agent.output());
    // Journal and lease in the image's volume, owned by its user: a restarted container resumes.
    const state = join(rootfs, IMAGE.stateDir);
    assert.ok(readdirSync(state).includes('tuner-agent.journal.json'), readdirSync(state).join(', '));
    assert.equal(statSync(join(state, 'tuner-agent.journal.json')).uid, uid);

    // The same container configured by a file instead: `-v ./agent.yaml:/etc/tuner-agent/agent.yaml:ro`
    // puts it where the agent looks last (as the mount shows it: mode 600, given to the image's user).
    const mounted = join(rootfs, SYSTEM_CONFIG_FILE);
    mkdirSync(dirname(mounted), { recursive: true });
    writeFileSync(
      mounted,
      YAML.stringify({
        postgresql: { connection_url: cluster.agentUrl },
        tuner: { server_url: service.url, api_key: apiKey, database_id: databaseId },
      }),
      { mode: 0o600 },
    );
    chownSync(mounted, uid, gid);
    const imageEnv = Object.fromEntries(spec.process.env.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
    const check = await exec('/usr/bin/unshare', [...chroot, '--check'], { cwd: work, env: imageEnv });
    assert.equal(check.code, 0, check.stdout + check.stderr);
    assert.equal(
      check.stdout.split('\n')[1],
      `configuration: ${SYSTEM_CONFIG_FILE} (the system's, no agent.yaml in the working directory)`,
      check.stdout,
    );
  },
);
