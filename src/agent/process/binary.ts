// The entry point of the single-file tuner-agent binary (scripts/build-agent.ts bundles it into a
// Node single executable application). The same command line as bin/tuner-agent.js, which is
// the entry point under npx; the binary carries its own Node, so it needs no version check.
import { main } from './cli.ts';
import { redact } from '../base/redact.ts';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(redact(`tuner-agent: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`));
    process.exitCode = 1;
  },
);
