// The single-file binary against the agent run from the source tree: size, time to `--version`,
// and time from start to the first report the tuning service receives. The three ways of starting
// it take turns within each round (their order rotates), so that the machine's drift hits all
// alike. Run: npm run build:agent -- --target linux-x64 && npx node bench/agent-startup.ts
// Goal: the binary's --version under 0.3 s.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { localGrantsSql } from '../src/agent/targets/local/permissions.ts';
import { startCluster } from '../src/lab/cluster.ts';
import { pathWithoutNode } from '../test/helpers/agent-process.ts';
import { ADMIN_PASSWORD, PersonClient, createServiceStore, startTestService } from '../test/helpers/service.ts';

const root = join(import.meta.dirname, '..');
const GOAL_VERSION_S = 0.3;
const REPORT_INTERVAL_S = 1;
const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '8' }, 'version-rounds': { type: 'string', default: '20' } },
});
const ROUNDS = Number(values.rounds);
const VERSION_ROUNDS = Number(values['version-rounds']);

const binary = join(root, 'dist', `tuner-agent-linux-${process.arch}`);
statSync(binary); // fails with ENOENT when it was not built
interface Variant {
  name: string;
  file: string;
  args: string[];
  path: string;
}
const VARIANTS: Variant[] = [
  { name: 'binary', file: binary, args: [], path: pathWithoutNode() },
  { name: 'node bin/tuner-agent.js', file: process.execPath, args: [join(root, 'bin', 'tuner-agent.js')], path: process.env['PATH'] ?? '' },
  // As the README has it: npx inside the project, which finds the project's Node in node_modules/.bin.
  { name: 'npx tuner-agent', file: 'npx', args: ['--no-install', 'tuner-agent'], path: process.env['PATH'] ?? '' },
];

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length / 2;
  return s.length % 2 ? s[Math.floor(m)]! : (s[m - 1]! + s[m]!) / 2;
};
/** A 95 % bootstrap interval of the ratio of medians a/b (seeded, so a run repeats itself). */
function ratioInterval(a: readonly number[], b: readonly number[]): [number, number] {
  let seed = 12345;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const resample = (xs: readonly number[]) => xs.map(() => xs[Math.floor(rand() * xs.length)]!);
  const ratios = Array.from({ length: 2000 }, () => median(resample(a)) / median(resample(b))).sort((x, y) => x - y);
  return [ratios[50]!, ratios[1949]!];
}
const s = (ms: number) => `${(ms / 1000).toFixed(3)} s`;

/** The runner's environment less any agent setting, with the variant's PATH. */
const envFor = (v: Variant): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AGENT_') && !k.startsWith('CLOUDB_'))),
  PATH: v.path,
});

function timeRun(v: Variant, args: string[], cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    execFile(v.file, [...v.args, ...args], { cwd, env: envFor(v) }, (error) => {
      if (error) reject(new Error(`${v.name} failed: ${error.message}`, { cause: error }));
      else resolve(performance.now() - started);
    });
  });
}

function summary(title: string, samples: Map<string, number[]>): void {
  console.log(`\n${title} (${samples.get('binary')!.length} rounds, interleaved)`);
  const base = samples.get('binary')!;
  for (const [name, xs] of samples) {
    const [lo, hi] = name === 'binary' ? [1, 1] : ratioInterval(xs, base);
    const ratio =
      name === 'binary' ? '' : `   ${(median(xs) / median(base)).toFixed(2)}× the binary (95 % interval ${lo.toFixed(2)}–${hi.toFixed(2)})`;
    console.log(`  ${name.padEnd(24)} median ${s(median(xs))}, min ${s(Math.min(...xs))}, max ${s(Math.max(...xs))}${ratio}`);
  }
}

/** Bytes of the production dependencies (what `npm ci --omit=dev` installs), each package once. */
function productionModulesBytes(): number {
  const dirs = execFileSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: root, encoding: 'utf8' })
    .trim()
    .split('\n')
    .slice(1);
  const size = (path: string): number => {
    const st = statSync(path);
    if (!st.isDirectory()) return st.size;
    return readdirSync(path)
      .filter((e) => e !== 'node_modules')
      .reduce((sum, e) => sum + size(join(path, e)), 0);
  };
  return [...new Set(dirs)].reduce((sum, d) => sum + size(d), 0);
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
console.log('sizes');
const bin = readFileSync(binary);
console.log(`  binary ${binary.replace(`${root}/`, '')}: ${mb(bin.length)} (${mb(gzipSync(bin, { level: 6 }).length)} gzipped)`);
console.log(
  `  npx tuner-agent needs Node (${mb(statSync(process.execPath).size)}) + production node_modules (${mb(productionModulesBytes())}) + the source tree`,
);

// --version
// Inside the project (.tmp/ is ignored by git), so that npx finds it from the agent's directory.
mkdirSync(join(root, '.tmp'), { recursive: true });
const work = mkdtempSync(join(root, '.tmp', 'startup-'));
try {
  const version = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
  for (const v of VARIANTS) await timeRun(v, ['--version'], work); // warm the file cache
  for (let round = 0; round < VERSION_ROUNDS; round++) {
    for (let i = 0; i < VARIANTS.length; i++) {
      const v = VARIANTS[(round + i) % VARIANTS.length]!;
      version.get(v.name)!.push(await timeRun(v, ['--version'], work));
    }
  }
  summary('time to --version', version);
  const binaryMedian = median(version.get('binary')!) / 1000;
  console.log(
    `  goal: binary --version under ${GOAL_VERSION_S} s: ${binaryMedian < GOAL_VERSION_S ? 'met' : 'NOT met'} (median ${binaryMedian.toFixed(3)} s)`,
  );

  // Start to first report: a throwaway cluster, the service (embedded storage), one database.
  const [cluster, store] = await Promise.all([startCluster(), createServiceStore('pglite')]);
  const service = await startTestService(store);
  try {
    for (const sql of localGrantsSql('agent_user')
      .split('\n')
      .filter((l) => l.startsWith('GRANT')))
      await cluster.sql(sql);
    const person = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
    const { databaseId, apiKey } = await person.createDatabase('startup', 'local');
    // The first report comes one interval after the start (a delta needs two snapshots): 1 s here.
    await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: REPORT_INTERVAL_S });
    writeFileSync(
      join(work, 'agent.yaml'),
      `postgresql:\n  connection_url: ${cluster.agentUrl}\ntuner:\n  server_url: ${service.url}\n  api_key: ${apiKey}\n  database_id: ${databaseId}\n`,
    );
    interface AgentView {
      agent: { connected: boolean; startedAt: string; lastReportAt: string | null } | null;
    }
    const agentView = async () => (await person.get<{ database: AgentView }>(`/api/manage/databases/${databaseId}`)).body.database.agent;
    const firstReport = async (v: Variant): Promise<number> => {
      const startedAt = Date.now();
      // Its own process group: npx's agent is a grandchild, and stops with the rest.
      const child = spawn(v.file, [...v.args, '--local'], { cwd: work, env: envFor(v), stdio: 'ignore', detached: true });
      const exited = new Promise((resolve) => child.on('close', resolve));
      try {
        for (;;) {
          // The lease this start took (the service's clock is this machine's), and its first report.
          const agent = await agentView();
          if (agent && Date.parse(agent.startedAt) >= startedAt && agent.lastReportAt) return Date.parse(agent.lastReportAt) - startedAt;
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        process.kill(-child.pid!, 'SIGTERM');
        await exited;
        // The next start must not meet this one's lease.
        for (let i = 0; i < 200 && (await agentView())?.connected; i++) await new Promise((r) => setTimeout(r, 50));
      }
    };
    const first = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
    await firstReport(VARIANTS[0]!); // warm the cluster and the service
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < VARIANTS.length; i++) {
        const v = VARIANTS[(round + i) % VARIANTS.length]!;
        first.get(v.name)!.push(await firstReport(v));
      }
    }
    summary(`start to the first report received by the service (report interval ${REPORT_INTERVAL_S} s)`, first);
  } finally {
    await service.close();
    await store.dispose();
    await cluster.destroy();
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
