import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SelfSignedCertificate {
  dir: string;
  certFile: string;
  keyFile: string;
  // The certificate itself, for a client to trust.
  ca: Buffer;
}

// A throwaway self-signed certificate for 127.0.0.1 and localhost, made by the machine's openssl,
// in a new temporary folder the caller removes.
export function selfSignedCertificate(prefix: string): SelfSignedCertificate {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  return { dir, certFile, keyFile, ca: readFileSync(certFile) };
}
