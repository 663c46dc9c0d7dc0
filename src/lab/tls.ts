// Throwaway certificate authorities for tests and the fakes, made with openssl at run time: a CA,
// and server certificates it signs for the names a test connects by. Nothing here is a secret
// worth keeping: every file lives in a temp dir that remove() deletes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface IssuedCertificate {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: string;
  readonly key: string;
}

export interface TestCa {
  /** The CA's common name, as it appears as the issuer of what it signs. */
  readonly name: string;
  /** The CA certificate (PEM): what sslrootcert, an extra CA file or NODE_EXTRA_CA_CERTS names. */
  readonly certFile: string;
  readonly cert: string;
  /** A server certificate for these host names and IP addresses (the first is also its CN). */
  issue(names: readonly string[]): IssuedCertificate;
  /** A client certificate for a PostgreSQL role (its CN), the key encrypted with `passphrase` when given. */
  issueClient(user: string, passphrase?: string): IssuedCertificate;
  remove(): void;
}

function openssl(args: string[]): void {
  try {
    execFileSync('openssl', args, { stdio: 'pipe' });
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString().trim() || e.message} (install Debian package "openssl")`, {
      cause: err,
    });
  }
}

/** `openssl req`'s arguments for a new P-256 key, unencrypted, written to `keyFile`. */
const newKey = (keyFile: string) => ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile];

export function makeTestCa(name: string): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-test-ca-'));
  const certFile = join(dir, 'ca.pem');
  const keyFile = join(dir, 'ca.key');
  openssl([
    'req',
    '-x509',
    ...newKey(keyFile),
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  let serial = 0;
  const sign = (commonName: string, extensions: string[], passphrase?: string): IssuedCertificate => {
    const stem = join(dir, `cert-${++serial}`);
    writeFileSync(
      `${stem}.ext`,
      [
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature',
        ...extensions,
        'subjectKeyIdentifier=hash',
        'authorityKeyIdentifier=keyid',
        '',
      ].join('\n'),
    );
    openssl(['req', '-new', ...newKey(`${stem}.key`), '-out', `${stem}.csr`, '-subj', `/CN=${commonName}`]);
    openssl([
      'x509',
      '-req',
      '-in',
      `${stem}.csr`,
      '-CA',
      certFile,
      '-CAkey',
      keyFile,
      '-set_serial',
      String(1000 + serial),
      '-days',
      '2',
      '-extfile',
      `${stem}.ext`,
      '-out',
      `${stem}.pem`,
    ]);
    if (passphrase !== undefined) {
      openssl(['pkey', '-in', `${stem}.key`, '-out', `${stem}.enc.key`, '-aes256', '-passout', `pass:${passphrase}`]);
      rmSync(`${stem}.key`);
    }
    const key = passphrase === undefined ? `${stem}.key` : `${stem}.enc.key`;
    return { certFile: `${stem}.pem`, keyFile: key, cert: readFileSync(`${stem}.pem`, 'utf8'), key: readFileSync(key, 'utf8') };
  };
  return {
    name,
    certFile,
    cert: readFileSync(certFile, 'utf8'),
    issue(names) {
      if (names.length === 0) throw new Error('a server certificate needs at least one name');
      const san = names.map((n) => (isIP(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
      return sign(names[0]!, ['extendedKeyUsage=serverAuth', `subjectAltName=${san}`]);
    },
    issueClient: (user, passphrase) => sign(user, ['extendedKeyUsage=clientAuth'], passphrase),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
