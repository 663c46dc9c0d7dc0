// npm run build:image: the tuner-agent container image, built without a container engine. The
// root filesystem is assembled here from the single-file binary (npm run build:agent) and this
// machine's own files: the shared libraries the binary links (ldd), the CA certificates, a
// passwd with the non-root user. umoci then writes it as an OCI image layout, tagged `latest` and
// the version. Containerfile documents the same image as an engine would build it.
//   node scripts/build-image.ts [--binary dist/tuner-agent-linux-x64] [--out dist/tuner-agent-image]
// Push it with skopeo: skopeo copy oci:dist/tuner-agent-image:latest docker://REGISTRY/tuner-agent:latest
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import pkg from '../package.json' with { type: 'json' };

const root = join(import.meta.dirname, '..');

/** The image's contract: docs/install.md and the setup page name these. */
export const IMAGE = {
  name: 'tuner-agent',
  user: { name: 'tuner', uid: 10001, gid: 10001 },
  binary: '/usr/local/bin/tuner-agent',
  /** The working directory and volume: journal and lease live here. */
  stateDir: '/var/lib/tuner-agent',
  caBundle: '/etc/ssl/certs/ca-certificates.crt',
} as const;

const ARCHITECTURES: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

function run(file: string, args: readonly string[]): string {
  try {
    return execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${file} ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`, { cause: err });
  }
}

/** The files the binary's dynamic loader needs, as ldd names them (the loader itself included). */
export function sharedLibraries(binary: string): string[] {
  const out = run('ldd', [binary]);
  const paths = new Set<string>();
  for (const line of out.split('\n')) {
    const linked = /=>\s+(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (linked) paths.add(linked[1]!);
    else if (/not found/.test(line)) throw new Error(`ldd ${binary}: ${line.trim()}`);
  }
  return [...paths].sort();
}

/** Copies a host file to the same path in the root filesystem, following links. */
function place(rootfs: string, hostPath: string, inImage = hostPath, mode?: number): void {
  const target = join(rootfs, inImage);
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(realpathSync(hostPath), target);
  if (mode !== undefined) chmodSync(target, mode);
}

/** Debian's copyright files of the packages the libraries and certificates come from. */
function debianNotices(rootfs: string, files: readonly string[]): void {
  for (const file of files) {
    // dpkg knows a file by the path its package installed (before /usr merged, or after).
    const owner = [file, realpathSync(file)]
      .map((path) => {
        try {
          return run('dpkg', ['-S', path]).split(':')[0]!;
        } catch {
          return null; // not from a Debian package (or no dpkg)
        }
      })
      .find((name) => name !== null);
    if (!owner) continue;
    const copyright = `/usr/share/doc/${owner}/copyright`;
    if (existsSync(copyright)) place(rootfs, copyright);
  }
}

function assembleRootfs(rootfs: string, binary: string): void {
  const libraries = sharedLibraries(binary);
  place(rootfs, binary, IMAGE.binary, 0o755);
  for (const lib of libraries) place(rootfs, lib);
  place(rootfs, IMAGE.caBundle);
  debianNotices(rootfs, [...libraries, '/usr/share/ca-certificates']);
  const licenses = join(dirname(binary), 'tuner-agent-licenses.txt');
  if (existsSync(licenses)) place(rootfs, licenses, '/usr/share/doc/tuner-agent/licenses.txt');

  const { name, uid, gid } = IMAGE.user;
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  writeFileSync(
    join(rootfs, 'etc/passwd'),
    `root:x:0:0:root:/root:/sbin/nologin\n${name}:x:${uid}:${gid}:tuner-agent:${IMAGE.stateDir}:/sbin/nologin\n`,
  );
  writeFileSync(join(rootfs, 'etc/group'), `root:x:0:\n${name}:x:${gid}:\n`);
  // Names from /etc/hosts (the engine writes one), then DNS.
  writeFileSync(join(rootfs, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
  mkdirSync(join(rootfs, IMAGE.stateDir), { recursive: true });
  chmodSync(join(rootfs, IMAGE.stateDir), 0o700);
  chownSync(join(rootfs, IMAGE.stateDir), uid, gid);
}

export interface BuiltImage {
  layout: string;
  tags: string[];
}

export function buildImage(binary: string, layout: string): BuiltImage {
  if (!existsSync(binary)) throw new Error(`${binary} does not exist: build it first with npm run build:agent`);
  const arch = /tuner-agent-linux-(\w+)$/.exec(binary)?.[1] ?? process.arch;
  if (arch !== process.arch || !ARCHITECTURES[arch]) {
    throw new Error(
      `the image is assembled from this machine's libraries, so only for its own architecture (${process.arch}), not ${arch}`,
    );
  }
  const work = mkdtempSync(join(tmpdir(), 'tuner-image-'));
  try {
    rmSync(layout, { recursive: true, force: true });
    const image = `${layout}:build`;
    run('umoci', ['init', '--layout', layout]);
    run('umoci', ['new', '--image', image]);
    const bundle = join(work, 'bundle');
    run('umoci', ['unpack', '--image', image, bundle]);
    assembleRootfs(join(bundle, 'rootfs'), binary);
    run('umoci', ['repack', '--image', image, '--history.created_by', 'scripts/build-image.ts', bundle]);
    const { uid, gid } = IMAGE.user;
    run('umoci', [
      'config',
      '--image',
      image,
      '--tag',
      pkg.version,
      '--os',
      'linux',
      '--architecture',
      ARCHITECTURES[arch],
      '--author',
      'tuner',
      '--config.user',
      `${uid}:${gid}`,
      '--config.entrypoint',
      'tuner-agent',
      '--config.workingdir',
      IMAGE.stateDir,
      '--config.volume',
      IMAGE.stateDir,
      '--config.env',
      'PATH=/usr/local/bin',
      // Node carries its own root certificates; these add the system's (and a private CA
      // mounted over the file).
      '--config.env',
      `NODE_EXTRA_CA_CERTS=${IMAGE.caBundle}`,
      '--config.label',
      `org.opencontainers.image.title=${IMAGE.name}`,
      '--config.label',
      `org.opencontainers.image.version=${pkg.version}`,
      '--config.label',
      `org.opencontainers.image.licenses=${pkg.license}`,
      '--history.created_by',
      'scripts/build-image.ts: user, entrypoint, working directory and volume',
    ]);
    run('umoci', ['tag', '--image', `${layout}:${pkg.version}`, 'latest']);
    run('umoci', ['rm', '--image', image]);
    run('umoci', ['gc', '--layout', layout]);
    return { layout, tags: ['latest', pkg.version] };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { binary: { type: 'string' }, out: { type: 'string' } } });
  const binary = values.binary ?? join(root, 'dist', `tuner-agent-linux-${process.arch}`);
  const out = values.out ?? join(root, 'dist', 'tuner-agent-image');
  try {
    const built = buildImage(binary, out);
    const size = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) as { manifests: unknown[] };
    console.log(`built the OCI image layout ${out} (${size.manifests.length} tags: ${built.tags.join(', ')})`);
    console.log(`push it: skopeo copy oci:${out}:${pkg.version} docker://REGISTRY/${IMAGE.name}:${pkg.version}`);
  } catch (err) {
    console.error(`build-image: ${(err as Error).message}`);
    process.exit(1);
  }
}
