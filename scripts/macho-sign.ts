// Ad-hoc code signing of a thin 64-bit Mach-O executable on any OS: what `codesign --sign -` does
// on a Mac, for the macOS tuner-agent binaries built on Linux (scripts/build-agent.ts). Apple
// silicon refuses to run native code without a valid signature, and macOS kills any binary whose
// signature no longer matches its bytes, as injecting the agent into Node's signed binary leaves it.
//
// An ad-hoc signature is an embedded signature with no certificate: a SuperBlob, pointed to by the
// LC_CODE_SIGNATURE load command at the end of __LINKEDIT, holding a CodeDirectory (the SHA-256 of
// every 4 KiB page of the file up to the signature, with flag CS_ADHOC), an empty Requirements set
// and an empty CMS wrapper. Layouts and constants from xnu's osfmk/kern/cs_blobs.h and
// EXTERNAL_HEADERS/mach-o/loader.h; every multi-byte field of the signature is big-endian, the
// Mach-O header and load commands are little-endian.
import { createHash } from 'node:crypto';

const MH_MAGIC_64 = 0xfeedfacf;
const MH_EXECUTE = 0x2;
const LC_SEGMENT_64 = 0x19;
const LC_CODE_SIGNATURE = 0x1d;
const HEADER_SIZE = 32;
const LINKEDIT_DATA_COMMAND_SIZE = 16;

const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0;
const CSMAGIC_CODEDIRECTORY = 0xfade0c02;
const CSMAGIC_REQUIREMENTS = 0xfade0c01;
const CSMAGIC_BLOBWRAPPER = 0xfade0b01;
const CSSLOT_CODEDIRECTORY = 0;
const CSSLOT_REQUIREMENTS = 2;
const CSSLOT_SIGNATURESLOT = 0x10000;
/** CodeDirectory version 0x20400: the fields up to execSegFlags (scatter, team, codeLimit64, execSeg). */
const CD_VERSION = 0x20400;
const CD_HEADER_SIZE = 88;
export const CS_ADHOC = 0x2;
const CS_EXECSEG_MAIN_BINARY = 0x1;
const CS_HASHTYPE_SHA256 = 2;
const HASH_SIZE = 32;
export const CS_PAGE_SIZE_LOG2 = 12;
const CS_PAGE_SIZE = 1 << CS_PAGE_SIZE_LOG2;
/** Special slots: -1 Info.plist (none: zeros), -2 the Requirements blob. */
const SPECIAL_SLOTS = 2;

export const CPU_TYPE_X86_64 = 0x01000007;
export const CPU_TYPE_ARM64 = 0x0100000c;

interface Segment {
  name: string;
  /** Where its segment_command_64 starts in the file. */
  command: number;
  fileoff: number;
  filesize: number;
}

interface MachO {
  cpuType: number;
  fileType: number;
  ncmds: number;
  sizeofcmds: number;
  segments: Segment[];
  /** Where the LC_CODE_SIGNATURE command starts, and the signature it points to. */
  signature: { command: number; dataoff: number; datasize: number } | null;
  /** The first byte after the load commands that is not free: the lowest section's file offset. */
  firstSectionOffset: number;
}

function fail(message: string): never {
  throw new Error(`macho-sign: ${message}`);
}

const cString = (bytes: Buffer) => {
  const end = bytes.indexOf(0);
  return bytes.toString('latin1', 0, end === -1 ? bytes.length : end);
};

function parse(file: Buffer): MachO {
  if (file.length < HEADER_SIZE || file.readUInt32LE(0) !== MH_MAGIC_64) {
    fail('not a thin 64-bit little-endian Mach-O (a universal binary must be split first)');
  }
  const ncmds = file.readUInt32LE(16);
  const sizeofcmds = file.readUInt32LE(20);
  const segments: Segment[] = [];
  let signature: MachO['signature'] = null;
  let firstSectionOffset = file.length;
  let at = HEADER_SIZE;
  for (let i = 0; i < ncmds; i++) {
    const cmd = file.readUInt32LE(at);
    const cmdsize = file.readUInt32LE(at + 4);
    if (cmdsize < 8 || at + cmdsize > HEADER_SIZE + sizeofcmds) fail(`load command ${i} runs past the load commands`);
    if (cmd === LC_SEGMENT_64) {
      segments.push({
        name: cString(file.subarray(at + 8, at + 24)),
        command: at,
        fileoff: Number(file.readBigUInt64LE(at + 40)),
        filesize: Number(file.readBigUInt64LE(at + 48)),
      });
      const nsects = file.readUInt32LE(at + 64);
      for (let s = 0; s < nsects; s++) {
        const offset = file.readUInt32LE(at + 72 + s * 80 + 48);
        // Zero-fill sections (__bss) have offset 0 and take no room in the file.
        if (offset !== 0) firstSectionOffset = Math.min(firstSectionOffset, offset);
      }
    } else if (cmd === LC_CODE_SIGNATURE) {
      signature = { command: at, dataoff: file.readUInt32LE(at + 8), datasize: file.readUInt32LE(at + 12) };
    }
    at += cmdsize;
  }
  return { cpuType: file.readInt32LE(4), fileType: file.readUInt32LE(12), ncmds, sizeofcmds, segments, signature, firstSectionOffset };
}

const alignUp = (n: number, to: number) => Math.ceil(n / to) * to;

/** The bytes of a blob: magic, length, then the body, all big-endian. */
function blob(magic: number, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(magic, 0);
  head.writeUInt32BE(8 + body.length, 4);
  return Buffer.concat([head, body]);
}

/** The CodeDirectory without its page hashes (filled in once the file is final), and where they go. */
function codeDirectory(identifier: string, codeLimit: number, text: Segment, mainBinary: boolean, requirements: Buffer) {
  const ident = Buffer.from(`${identifier}\0`, 'utf8');
  const nCodeSlots = Math.ceil(codeLimit / CS_PAGE_SIZE);
  const hashOffset = CD_HEADER_SIZE + ident.length + SPECIAL_SLOTS * HASH_SIZE;
  const cd = Buffer.alloc(hashOffset + nCodeSlots * HASH_SIZE);
  cd.writeUInt32BE(CSMAGIC_CODEDIRECTORY, 0);
  cd.writeUInt32BE(cd.length, 4);
  cd.writeUInt32BE(CD_VERSION, 8);
  cd.writeUInt32BE(CS_ADHOC, 12);
  cd.writeUInt32BE(hashOffset, 16);
  cd.writeUInt32BE(CD_HEADER_SIZE, 20); // identOffset
  cd.writeUInt32BE(SPECIAL_SLOTS, 24);
  cd.writeUInt32BE(nCodeSlots, 28);
  // codeLimit is 32 bits; codeLimit64 (offset 56) is only for files of 4 GiB and more.
  if (codeLimit > 0xffffffff) fail('files of 4 GiB and more are not supported');
  cd.writeUInt32BE(codeLimit, 32);
  cd.writeUInt8(HASH_SIZE, 36);
  cd.writeUInt8(CS_HASHTYPE_SHA256, 37);
  cd.writeUInt8(0, 38); // platform: not a platform binary
  cd.writeUInt8(CS_PAGE_SIZE_LOG2, 39);
  // spare2 (40), scatterOffset (44), teamOffset (48: no team), spare3 (52), codeLimit64 (56): zero.
  cd.writeBigUInt64BE(BigInt(text.fileoff), 64); // execSegBase
  cd.writeBigUInt64BE(BigInt(text.filesize), 72); // execSegLimit
  cd.writeBigUInt64BE(BigInt(mainBinary ? CS_EXECSEG_MAIN_BINARY : 0), 80);
  ident.copy(cd, CD_HEADER_SIZE);
  // Special slot -n sits n hashes before hashOffset; -1 (Info.plist) stays zero.
  createHash('sha256')
    .update(requirements)
    .digest()
    .copy(cd, hashOffset - CSSLOT_REQUIREMENTS * HASH_SIZE);
  return { cd, hashOffset, nCodeSlots };
}

/**
 * The file signed ad hoc under `identifier`, replacing any signature it had. The file must be a
 * thin 64-bit Mach-O whose last segment is __LINKEDIT, with room after its load commands for one
 * more (16 bytes) when it has no signature yet.
 */
export function adHocSign(input: Buffer, identifier: string): Buffer {
  const macho = parse(input);
  const linkedit = macho.segments.find((s) => s.name === '__LINKEDIT') ?? fail('no __LINKEDIT segment');
  const text = macho.segments.find((s) => s.name === '__TEXT') ?? fail('no __TEXT segment');
  const linkeditEnd = linkedit.fileoff + linkedit.filesize;
  if (macho.segments.some((s) => s !== linkedit && s.fileoff + s.filesize > linkedit.fileoff)) {
    fail('__LINKEDIT is not the last segment of the file');
  }
  // The signature goes where the old one was, else after everything else, 16-byte aligned.
  const codeLimit = macho.signature ? macho.signature.dataoff : alignUp(linkeditEnd, 16);
  if (!macho.signature && input.length > linkeditEnd) fail(`${input.length - linkeditEnd} bytes after __LINKEDIT`);

  const requirements = blob(CSMAGIC_REQUIREMENTS, Buffer.alloc(4)); // count 0
  const cms = blob(CSMAGIC_BLOBWRAPPER); // no CMS signature: ad hoc
  const { cd, hashOffset, nCodeSlots } = codeDirectory(identifier, codeLimit, text, macho.fileType === MH_EXECUTE, requirements);
  const entries = [
    [CSSLOT_CODEDIRECTORY, cd],
    [CSSLOT_REQUIREMENTS, requirements],
    [CSSLOT_SIGNATURESLOT, cms],
  ] as const;
  const superHeader = Buffer.alloc(12 + entries.length * 8);
  let offset = superHeader.length;
  entries.forEach(([slot, b], i) => {
    superHeader.writeUInt32BE(slot, 12 + i * 8);
    superHeader.writeUInt32BE(offset, 16 + i * 8);
    offset += b.length;
  });
  superHeader.writeUInt32BE(CSMAGIC_EMBEDDED_SIGNATURE, 0);
  superHeader.writeUInt32BE(offset, 4);
  superHeader.writeUInt32BE(entries.length, 8);
  const datasize = alignUp(offset, 16);

  const out = Buffer.alloc(codeLimit + datasize);
  input.copy(out, 0, 0, Math.min(input.length, codeLimit));
  let command = macho.signature?.command;
  if (command === undefined) {
    command = HEADER_SIZE + macho.sizeofcmds;
    if (command + LINKEDIT_DATA_COMMAND_SIZE > macho.firstSectionOffset) {
      fail('no room after the load commands for LC_CODE_SIGNATURE');
    }
    out.writeUInt32LE(macho.ncmds + 1, 16);
    out.writeUInt32LE(macho.sizeofcmds + LINKEDIT_DATA_COMMAND_SIZE, 20);
    out.writeUInt32LE(LC_CODE_SIGNATURE, command);
    out.writeUInt32LE(LINKEDIT_DATA_COMMAND_SIZE, command + 4);
  }
  out.writeUInt32LE(codeLimit, command + 8);
  out.writeUInt32LE(datasize, command + 12);
  // __LINKEDIT now ends with the signature; its memory size covers it, in whole pages of the
  // platform (16 KiB on arm64, 4 KiB on x86_64).
  const filesize = codeLimit + datasize - linkedit.fileoff;
  out.writeBigUInt64LE(BigInt(filesize), linkedit.command + 48);
  out.writeBigUInt64LE(BigInt(alignUp(filesize, macho.cpuType === CPU_TYPE_ARM64 ? 0x4000 : 0x1000)), linkedit.command + 32);

  // Last: the page hashes, over the header as changed above.
  for (let page = 0; page < nCodeSlots; page++) {
    const start = page * CS_PAGE_SIZE;
    createHash('sha256')
      .update(out.subarray(start, Math.min(start + CS_PAGE_SIZE, codeLimit)))
      .digest()
      .copy(cd, hashOffset + page * HASH_SIZE);
  }
  Buffer.concat([superHeader, ...entries.map(([, b]) => b)]).copy(out, codeLimit);
  return out;
}
