// Regenerates the docs that are derived from code (tests fail when they are stale).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configurationDoc } from '../src/agent/config/docs.ts';
import { PROTOCOL_DOC_PATH, protocolDoc } from '../src/service/docs/protocol-doc.ts';

const root = join(import.meta.dirname, '..');
writeFileSync(join(root, 'docs', 'configuration.md'), configurationDoc());
writeFileSync(PROTOCOL_DOC_PATH, protocolDoc());
console.log('wrote docs/configuration.md and docs/protocol.md');
