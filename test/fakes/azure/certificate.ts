// A throwaway TLS certificate for the fake Cloud B on 127.0.0.1, made with openssl at test time.
// The agent process trusts it through NODE_EXTRA_CA_CERTS: the Azure SDK sends bearer tokens over
// HTTPS only, so the fake has to speak it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificate {
  /** PEM file to hand to NODE_EXTRA_CA_CERTS. */
  readonly certFile: string;
  readonly cert: string;
  readonly key: string;
  remove(): void;
}

export function makeCertificate(): TestCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-fake-azure-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', '/CN=fake Cloud B',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-addext', 'basicConstraints=critical,CA:TRUE',
  ], { stdio: 'pipe' });
  return {
    certFile,
    cert: readFileSync(certFile, 'utf8'),
    key: readFileSync(keyFile, 'utf8'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
