#!/usr/bin/env node
// Plain JavaScript so that an old Node gets a clear message instead of a syntax error.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `tuner-agent needs Node.js 22.18 or later (found ${process.versions.node}); run it through npx or npm scripts, which use the project's Node 24\n`,
  );
  process.exit(2);
}
const { main } = await import('../src/agent/process/cli.ts');
const { redact } = await import('../src/agent/base/redact.ts');
try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  // As in src/agent/process/binary.ts: even a crash prints nothing unmasked.
  process.stderr.write(redact(`tuner-agent: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`));
  process.exitCode = 1;
}
