// tuner-agent for Windows (x64). Built on Linux (scripts/build-agent.ts) and unable to start here
// (Debian 12's Wine 8.0 cannot start Node 24's own node.exe: see "Windows" in docs/install.md),
// it is read back as the Windows loader and Node read it, by the npm PE parser pe-library, which
// shares no code with what wrote it (postject rewrites the file with LIEF; portable-executable-
// signature strips Node's signature): the PE headers, the agent's blob in the resource where
// Node on Windows looks for it, byte-equal to the blob the same sources make, and everything else
// as in Node's official node.exe. Then install.ps1 as the service serves it (no PowerShell here:
// what it names is checked, not run).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { NODE_PACKAGES, binaryName, bundle, hostNode, seaBlob } from '../scripts/build-agent.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { WINDOWS_BINARY, installPowerShellScript } from '../src/service/http/downloads.ts';
import { parseSums } from '../src/service/setup/downloads.ts';
import { builtBinary } from './helpers/agent-binary.ts';
import { createServiceStore, startTestService, type ServiceStore, type TestService } from './helpers/service.ts';

/** What pe-library returns, as far as this test reads it. Its own declarations pull in the DOM
 * library (`/// <reference lib="dom" />`), whose fetch types clash with Node's in every other test:
 * it is imported by a name TypeScript does not follow. */
interface NtExecutableSection {
  info: { name: string; virtualAddress: number; virtualSize: number; sizeOfRawData: number };
  data: ArrayBuffer | null;
}
interface NtExecutable {
  newHeader: {
    fileHeader: { machine: number; characteristics: number };
    optionalHeader: {
      magic: number;
      subsystem: number;
      checkSum: number;
      addressOfEntryPoint: number;
      dllCharacteristics: number;
      imageBase: number;
    };
    optionalHeaderDataDirectory: { get(entry: number): { virtualAddress: number; size: number } };
  };
  getAllSections(): readonly NtExecutableSection[];
}
interface ResourceEntry {
  type: string | number;
  id: string | number;
  lang: string | number;
  bin: ArrayBuffer;
}
const PE_LIBRARY: string = 'pe-library';
const { NtExecutable, NtExecutableResource, calculateCheckSumForPE } = (await import(PE_LIBRARY)) as {
  NtExecutable: { from(bin: ArrayBuffer | ArrayBufferView, options?: { ignoreCert?: boolean }): NtExecutable };
  NtExecutableResource: { from(exe: NtExecutable): { entries: ResourceEntry[] } };
  calculateCheckSumForPE: (bin: ArrayBuffer) => number;
};

const root = join(import.meta.dirname, '..');
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** The first four bytes of a SEA preparation blob (kMagic in Node's src/node_sea.cc). */
const SEA_BLOB_MAGIC = 0x0143da20;
/** The PE/COFF specification (Microsoft's "PE Format"): the machine types (section "Machine
 * Types"), the optional header's magic for PE32+ ("Optional Header Standard Fields"), the
 * subsystems ("Windows Subsystem"), the characteristics ("Characteristics"), the data directories
 * ("Optional Header Data Directories": 2 is the resource table, 4 the certificate table) and the
 * resource types (RT_RCDATA, winuser.h). */
const PE = {
  machineAmd64: 0x8664,
  magicPe32Plus: 0x20b,
  subsystemWindowsCui: 3,
  executableImage: 0x0002,
  dll: 0x2000,
  resourceTable: 2,
  certificateTable: 4,
  rcData: 10,
};

const found = builtBinary('windows-x64', 'npm run build:agent -- --target windows-x64');
// .ci/run builds it (on any processor: its blob is made by the project's own Node).
if ('missing' in found && process.env['CI']) throw new Error(`CI builds the Windows binary (.ci/run), but ${found.missing}`);
const skip = 'missing' in found ? found.missing : false;
const exePath = 'path' in found ? found.path : '';

const { name: nodeName, version: nodeVersion } = NODE_PACKAGES['windows-x64'];
/** Node's official node.exe as the npm package has it (the build's cache). */
const officialNode = join(root, 'node_modules', '.cache', 'tuner-agent-build', `${nodeName}-${nodeVersion}`, 'package', 'bin', 'node.exe');

let parsed: { file: Buffer; exe: NtExecutable } | undefined;
function exe(): { file: Buffer; exe: NtExecutable } {
  if (!parsed) {
    const file = readFileSync(exePath);
    // ignoreCert: a certificate table left in the file is for the test below to find, not a parse error.
    parsed = { file, exe: NtExecutable.from(file, { ignoreCert: true }) };
  }
  return parsed;
}

/** The bytes a section puts in memory that come from the file (past them, only alignment padding). */
function loaded(section: NtExecutableSection): Buffer {
  assert.ok(section.data, `${section.info.name} has data`);
  return Buffer.from(section.data).subarray(0, Math.min(section.info.virtualSize, section.info.sizeOfRawData));
}

function seaResource(pe: NtExecutable): Buffer {
  const entries = NtExecutableResource.from(pe).entries.filter((e) => e.type === PE.rcData && e.id === 'NODE_SEA_BLOB');
  assert.equal(entries.length, 1, 'one RCDATA resource named NODE_SEA_BLOB');
  return Buffer.from(entries[0]!.bin);
}

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('windows-x64: a PE32+ console executable for AMD64, its checksum right, with no signature left broken', { skip }, () => {
  const { file, exe: pe } = exe();
  const { fileHeader, optionalHeader } = pe.newHeader;
  assert.equal(fileHeader.machine, PE.machineAmd64, `machine 0x${fileHeader.machine.toString(16)}`);
  assert.equal(optionalHeader.magic, PE.magicPe32Plus, 'PE32+');
  assert.equal(optionalHeader.subsystem, PE.subsystemWindowsCui, 'the console subsystem: standard output and Ctrl+C work');
  assert.equal(fileHeader.characteristics & PE.executableImage, PE.executableImage, 'an executable image');
  assert.equal(fileHeader.characteristics & PE.dll, 0, 'not a DLL');
  // Node's Authenticode signature no longer matches a file with the blob in it: it is gone, not broken.
  assert.deepEqual(pe.newHeader.optionalHeaderDataDirectory.get(PE.certificateTable), { virtualAddress: 0, size: 0 });
  // pe-library reads an ArrayBuffer of the whole file (a copy: a Buffer may share a bigger one).
  assert.equal(optionalHeader.checkSum, calculateCheckSumForPE(new Uint8Array(file).buffer), "the header's checksum is the file's");
});

test(
  "windows-x64: the agent's blob in the resource Node looks for, byte-equal to the blob its sources make, the fuse flipped",
  { skip },
  async () => {
    const { file, exe: pe } = exe();
    const resource = seaResource(pe);
    assert.equal(resource.readUInt32LE(0), SEA_BLOB_MAGIC, 'a SEA preparation blob');
    // The build's own directory stays out of the binary: the blob names its main file relatively.
    assert.ok(resource.includes('tuner-agent.cjs'), 'the main file named in the blob');
    assert.ok(!file.includes(join(root, 'node_modules')), "no trace of the build's directory");

    // The same sources, bundled and made into a blob here, by the Node the binary carries.
    const work = mkdtempSync(join(tmpdir(), 'tuner-windows-blob-'));
    dirs.push(work);
    const main = join(work, 'tuner-agent.cjs');
    await bundle(main);
    const blob = readFileSync(seaBlob(work, main, false, hostNode(nodeVersion), nodeVersion));
    assert.ok(resource.equals(blob), `the resource (${resource.length} bytes) is the blob (${blob.length} bytes)`);

    // Node checks the fuse before it looks for the resource.
    assert.ok(file.includes(`${SEA_FUSE}:1`), 'the fuse is flipped');
    assert.ok(!file.includes(`${SEA_FUSE}:0`));
  },
);

test(
  "windows-x64: Node's official node.exe around it, unchanged but for the fuse, with its own resources",
  { skip: skip || (existsSync(officialNode) ? false : `no ${officialNode}: npm run build:agent -- --target windows-x64 fetches it`) },
  () => {
    const official = NtExecutable.from(readFileSync(officialNode), { ignoreCert: true });
    const { exe: pe } = exe();
    const ours = new Map(pe.getAllSections().map((s) => [s.info.name, s]));
    for (const section of official.getAllSections()) {
      const name = section.info.name;
      // The resources moved to a section of their own (below); the address range they left joins
      // the section before them, whose own bytes stay as they were.
      if (name === '.rsrc') continue;
      const mine = ours.get(name);
      assert.ok(mine, `the ${name} section is there`);
      assert.equal(mine.info.virtualAddress, section.info.virtualAddress, `${name} at its address`);
      const want = Buffer.from(loaded(section).toString('latin1').replace(`${SEA_FUSE}:0`, `${SEA_FUSE}:1`), 'latin1');
      assert.ok(loaded(mine).subarray(0, want.length).equals(want), `${name}: Node's bytes`);
    }
    const { optionalHeader: theirs } = official.newHeader;
    const { optionalHeader: mine } = pe.newHeader;
    assert.equal(mine.addressOfEntryPoint, theirs.addressOfEntryPoint, 'the entry point');
    assert.equal(mine.dllCharacteristics, theirs.dllCharacteristics, 'ASLR, DEP and the rest as Node has them');
    assert.equal(mine.imageBase, theirs.imageBase);

    // Node's icon, version information and manifest (which says it runs on Windows 10 and later).
    const mineResources = NtExecutableResource.from(pe).entries;
    for (const entry of NtExecutableResource.from(official).entries) {
      const same = mineResources.find((e) => e.type === entry.type && e.id === entry.id && e.lang === entry.lang);
      assert.ok(same, `resource ${entry.type}/${entry.id}/${entry.lang} kept`);
      assert.ok(Buffer.from(same.bin).equals(Buffer.from(entry.bin)), `resource ${entry.type}/${entry.id} unchanged`);
    }
  },
);

test('windows-x64: in SHA256SUMS with its SHA-256, beside the other binaries', { skip }, () => {
  const sums = parseSums(readFileSync(join(root, 'dist', 'SHA256SUMS'), 'utf8'));
  const line = sums.find((b) => b.file === basename(exePath));
  assert.ok(line, 'tuner-agent-windows-x64.exe is listed');
  assert.equal(line.target, 'windows-x64');
  assert.equal(line.sha256, createHash('sha256').update(exe().file).digest('hex'));
});

describe('install.ps1, as the service serves it', () => {
  let store: ServiceStore;
  let service: TestService;
  let downloads: string;
  /** A stand-in for the binary (the real one is 90 MB and cannot run here), and sums as the build writes them. */
  const standIn = Buffer.from('MZ stand-in for tuner-agent-windows-x64.exe');
  const standInSum = createHash('sha256').update(standIn).digest('hex');

  before(async () => {
    downloads = mkdtempSync(join(tmpdir(), 'tuner-windows-downloads-'));
    dirs.push(downloads);
    writeFileSync(join(downloads, WINDOWS_BINARY), standIn);
    writeFileSync(join(downloads, 'tuner-agent-linux-x64'), 'linux stand-in');
    const linuxSum = createHash('sha256').update('linux stand-in').digest('hex');
    writeFileSync(join(downloads, 'SHA256SUMS'), `${linuxSum}  tuner-agent-linux-x64\n${standInSum}  ${WINDOWS_BINARY}\n`);
    store = await createServiceStore('pglite');
    service = await startTestService(store, { TUNER_DOWNLOADS_DIR: downloads });
  });
  after(async () => {
    await service?.close();
    await store?.dispose();
  });

  test('served as text beside install.sh, with the address of this service, naming the binary the build makes', async () => {
    const response = await fetch(`${service.url}/install.ps1`);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(response.headers.get('cache-control'), 'no-store');
    const script = await response.text();
    // Windows PowerShell 5.1 reads a script without a byte order mark in the system's code page.
    assert.ok(/^[\t\n\r -~]*$/.test(script), 'ASCII only');
    assert.ok(!script.includes('__'), 'every placeholder filled in');
    assert.match(script, new RegExp(`^\\$ServiceUrl = '${service.url.replace(/[.]/g, '\\.')}'$`, 'm'));
    assert.match(script, /^\$Downloads = "\$ServiceUrl\/downloads"$/m);
    assert.equal(WINDOWS_BINARY, binaryName('windows-x64'));
    assert.match(script, new RegExp(`^\\$Name = '${WINDOWS_BINARY.replace('.', '\\.')}'$`, 'm'));
    assert.match(script, /Invoke-WebRequest -UseBasicParsing -Uri "\$Downloads\/SHA256SUMS"/);
    assert.match(script, /Invoke-WebRequest -UseBasicParsing -Uri "\$Downloads\/\$Name" -OutFile \$Partial/);
    assert.match(script, /Get-FileHash -Algorithm SHA256 -LiteralPath \$Partial/);
    assert.match(script, /^\$InstallDir = Join-Path \$env:ProgramFiles 'tuner-agent'$/m);
    // Next steps name every target the agent has.
    for (const kind of TARGETS.kinds) assert.ok(script.includes(`--${kind}`), `--${kind} in the next steps`);

    // What the script downloads, from where it says, and the line of the sums it checks it against.
    const downloadsUrl = `${service.url}/downloads`;
    const sumsText = await (await fetch(`${downloadsUrl}/SHA256SUMS`)).text();
    const linePattern = /-cmatch '([^']+)'/.exec(script)?.[1];
    assert.ok(linePattern, 'the pattern the script reads SHA256SUMS with');
    // .NET and JavaScript read this pattern alike: anchors, classes, a group and counts only.
    const matched = sumsText.split('\n').flatMap((line) => {
      const m = new RegExp(linePattern).exec(line.trim());
      return m ? [{ sum: m[1], file: m[2] }] : [];
    });
    assert.deepEqual(
      matched.map((m) => m.file),
      ['tuner-agent-linux-x64', WINDOWS_BINARY],
    );
    assert.equal(matched.find((m) => m.file === WINDOWS_BINARY)?.sum, standInSum);
    const binary = await fetch(`${downloadsUrl}/${WINDOWS_BINARY}`);
    assert.equal(binary.status, 200);
    assert.equal(binary.headers.get('content-type'), 'application/octet-stream');
    assert.ok(Buffer.from(await binary.arrayBuffer()).equals(standIn));
  });

  test('the address goes in only when it is safe in a PowerShell string', () => {
    assert.match(installPowerShellScript('http://[::1]:8080/')!, /^\$ServiceUrl = 'http:\/\/\[::1\]:8080'$/m);
    for (const unsafe of ["http://x';Remove-Item C:\\ -Recurse;'", 'http://a b', 'http://x$(whoami)', 'http://x`n', 'file:///C:/']) {
      assert.equal(installPowerShellScript(unsafe), null, unsafe);
    }
  });
});
