// npm run build:agent [-- --target linux-x64 --target linux-arm64]: the single-file tuner-agent
// binaries in dist/, with dist/SHA256SUMS. Each is a Node single executable application: the
// agent bundled by esbuild into one CommonJS file, injected (postject) into a copy of the
// official Node binary of the target, the same version as the project's own Node. Nothing is
// downloaded but that Node, as the npm package node-<os>-<arch>, through npm itself.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import pkg from '../package.json' with { type: 'json' };

export const TARGETS = ['linux-x64', 'linux-arm64'] as const;
export type BinaryTarget = (typeof TARGETS)[number];

const root = join(import.meta.dirname, '..');
const NODE_VERSION = pkg.devDependencies.node;
/** The fuse string Node looks for to know it carries an application (Node's SEA documentation). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

export const binaryName = (target: string): string => `tuner-agent-${target}`;
export const hostTarget = (): string => `${process.platform}-${process.arch}`;

function run(file: string, args: readonly string[], cwd = root): string {
  return execFileSync(file, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The agent as one CommonJS file (a Node 24 single executable runs CommonJS), and the npm
 * packages in it, for the licence file. */
async function bundle(outFile: string): Promise<string[]> {
  const result = await build({
    entryPoints: [join(root, 'src/agent/binary.ts')],
    outfile: outFile,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    // `module` first: the ESM builds of the SDKs tree-shake to a third of their CommonJS size.
    mainFields: ['module', 'main'],
    minify: true,
    // Error messages and --debug stacks keep readable names.
    keepNames: true,
    legalComments: 'none',
    // pg's optional native binding: required only when a program asks for pg.native.
    external: ['pg-native'],
    // ESM packages that read import.meta.url get the binary's own file URL in CommonJS too.
    banner: { js: 'var __importMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
    define: { 'import.meta.url': '__importMetaUrl' },
    metafile: true,
    logLevel: 'warning',
  });
  const packages = new Set<string>();
  for (const input of Object.keys(result.metafile.inputs)) {
    const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (m) packages.add(m[1]!);
  }
  return [...packages].sort();
}

/** The preparation blob; a code cache is tied to the V8 of the machine that makes it, so only the
 * host's own target gets one. */
function seaBlob(workDir: string, mainFile: string, codeCache: boolean): string {
  const blob = join(workDir, `agent-${codeCache ? 'cached' : 'portable'}.blob`);
  const config = join(workDir, `sea-${codeCache ? 'cached' : 'portable'}.json`);
  writeFileSync(config, JSON.stringify({ main: mainFile, output: blob, disableExperimentalSEAWarning: true, useCodeCache: codeCache }));
  run(process.execPath, ['--experimental-sea-config', config], workDir);
  return blob;
}

/** The official Node binary (and its licence) for a target, from the npm package node-<target>,
 * unpacked once into node_modules/.cache. npm checks the tarball against the registry's integrity. */
function nodeFor(target: string): { binary: string; license: string } {
  const dir = join(root, 'node_modules', '.cache', 'tuner-agent-build', `node-${target}-${NODE_VERSION}`);
  const binary = join(dir, 'package', 'bin', 'node');
  if (!existsSync(binary)) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const spec = `node-${target}@${NODE_VERSION}`;
    process.stdout.write(`fetching ${spec} from the npm registry\n`);
    const tarball = run('npm', ['pack', spec, '--silent', '--pack-destination', dir]).trim().split('\n').pop()!;
    run('tar', ['-xzf', tarball, 'package/bin/node', 'package/LICENSE'], dir);
    rmSync(join(dir, tarball));
  }
  return { binary, license: join(dir, 'package', 'LICENSE') };
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** One text with the licences of everything the binaries carry: Node and the bundled packages. */
function licenceText(nodeLicense: string, packages: readonly string[]): string {
  const parts = [`tuner-agent ${pkg.version} (${pkg.license}) carries Node.js ${NODE_VERSION} and these npm packages.\n`];
  parts.push(`=== Node.js ${NODE_VERSION}\n\n${readFileSync(nodeLicense, 'utf8')}`);
  for (const dir of packages) {
    const meta = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as { name: string; version: string; license?: string };
    const file = readdirSync(join(root, dir)).find((f) => /^(licen[sc]e|copying)(\.|$)/i.test(f));
    const text = file
      ? readFileSync(join(root, dir, file), 'utf8')
      : `(no licence file in the package; package.json says ${meta.license ?? 'nothing'})\n`;
    parts.push(`=== ${meta.name} ${meta.version} (${meta.license ?? 'unknown'})\n\n${text}`);
  }
  return parts.join('\n');
}

export async function buildAgentBinaries(targets: readonly BinaryTarget[], outDir = join(root, 'dist')): Promise<string[]> {
  if (process.version !== `v${NODE_VERSION}`) {
    throw new Error(
      `the blob must be made by Node ${NODE_VERSION}, the version the binaries carry, not ${process.version}: run it through npm run build:agent`,
    );
  }
  const work = join(root, 'node_modules', '.cache', 'tuner-agent-build', 'work');
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  mkdirSync(outDir, { recursive: true });

  const mainFile = join(work, 'tuner-agent.cjs');
  const packages = await bundle(mainFile);
  const blobs = new Map<boolean, string>();
  const built: string[] = [];
  let license = '';
  for (const target of targets) {
    const node = nodeFor(target);
    license = node.license;
    const codeCache = target === hostTarget();
    if (!blobs.has(codeCache)) blobs.set(codeCache, seaBlob(work, mainFile, codeCache));
    const staging = join(work, binaryName(target));
    copyFileSync(node.binary, staging);
    chmodSync(staging, 0o755);
    try {
      run(process.execPath, [
        join(root, 'node_modules/postject/dist/cli.js'),
        staging,
        'NODE_SEA_BLOB',
        blobs.get(codeCache)!,
        '--sentinel-fuse',
        SEA_FUSE,
      ]);
    } catch (err) {
      throw new Error(
        `postject could not inject the agent into the Node binary for ${target}: ${(err as { stderr?: string }).stderr ?? String(err)}`,
        { cause: err },
      );
    }
    if (target === hostTarget()) {
      const says = run(staging, ['--version']).trim();
      if (says !== `tuner-agent ${pkg.version}`) throw new Error(`the ${target} binary answered --version with "${says}"`);
    }
    renameSync(staging, join(outDir, binaryName(target)));
    built.push(binaryName(target));
  }
  // The directory holds this build only: a binary of an earlier build would not match its sums.
  for (const f of readdirSync(outDir)) if (/^tuner-agent-[a-z0-9]+-[a-z0-9]+$/.test(f) && !built.includes(f)) rmSync(join(outDir, f));
  const sums = built
    .sort()
    .map((name) => `${sha256(join(outDir, name))}  ${name}\n`)
    .join('');
  writeFileSync(join(outDir, 'SHA256SUMS'), sums);
  writeFileSync(join(outDir, 'tuner-agent-licenses.txt'), licenceText(license, packages));
  rmSync(work, { recursive: true, force: true });
  return built;
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { target: { type: 'string', multiple: true }, out: { type: 'string' } } });
  const targets = values.target ?? [...TARGETS];
  const unknown = targets.filter((t) => !(TARGETS as readonly string[]).includes(t));
  if (unknown.length > 0) {
    console.error(`build-agent: unknown target ${unknown.join(', ')}; expected ${TARGETS.join(' or ')} (macOS: see docs/install.md)`);
    process.exit(2);
  }
  const outDir = values.out ?? join(root, 'dist');
  const started = performance.now();
  const built = await buildAgentBinaries(targets as BinaryTarget[], outDir);
  console.log(
    `built ${built.join(', ')} and SHA256SUMS in ${relative(process.cwd(), outDir) || '.'} (${((performance.now() - started) / 1000).toFixed(1)} s)`,
  );
}
