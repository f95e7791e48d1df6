/**
 * `weft license keygen|sign|verify`: the licence signing tool (docs/licence.md).
 *
 *   weft license keygen --out PREFIX      writes PREFIX.key (PKCS#8 PEM, mode 0600),
 *                                         PREFIX.pub (raw base64url) and prints the public key
 *   weft license sign --key PREFIX.key --licensee NAME --expires DATE
 *                     [--features a,b] [--max-readers N] [--out FILE]
 *   weft license verify FILE [--public-key=KEY]   prints the state as JSON;
 *                                         exit 0 when valid, 1 otherwise
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { WeftError } from '../core/errors.ts';
import { generateLicenseKeys, License, signLicense, type LicensePayload } from './license.ts';

const USAGE = `usage:
  weft license keygen --out PREFIX
  weft license sign --key FILE --licensee NAME --expires YYYY-MM-DD[THH:MM:SSZ] [--features a,b] [--max-readers N] [--out FILE]
  weft license verify FILE [--public-key=KEY]`;

function keygen(argv: string[]): number {
  const { values } = parseArgs({ args: argv, options: { out: { type: 'string' } } });
  if (!values.out) throw new WeftError('invalid_argument', `--out is required\n${USAGE}`);
  const { privatePem, publicKey } = generateLicenseKeys();
  writeFileSync(`${values.out}.key`, privatePem, { mode: 0o600, flag: 'wx' });
  writeFileSync(`${values.out}.pub`, `${publicKey}\n`);
  process.stdout.write(`${JSON.stringify({ private_key: `${values.out}.key`, public_key: publicKey })}\n`);
  return 0;
}

function sign(argv: string[]): number {
  const { values } = parseArgs({
    args: argv,
    options: { key: { type: 'string' }, licensee: { type: 'string' }, expires: { type: 'string' }, features: { type: 'string' }, 'max-readers': { type: 'string' }, out: { type: 'string' } },
  });
  if (!values.key || !values.licensee || !values.expires) throw new WeftError('invalid_argument', `--key, --licensee and --expires are required\n${USAGE}`);
  const expires = Date.parse(values.expires);
  if (Number.isNaN(expires)) throw new WeftError('invalid_argument', `--expires must be an ISO 8601 date, got "${values.expires}"`);
  const max = values['max-readers'] === undefined ? null : Number(values['max-readers']);
  if (max !== null && !(Number.isInteger(max) && max >= 1)) throw new WeftError('invalid_argument', `--max-readers must be a positive integer, got "${values['max-readers']}"`);
  const payload: LicensePayload = {
    licensee: values.licensee,
    expires: new Date(expires).toISOString(),
    features: (values.features ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    max_readers: max,
    issued: new Date().toISOString(),
  };
  let pem: string;
  try {
    pem = readFileSync(values.key, 'utf8');
  } catch (e) {
    throw new WeftError('invalid_argument', `--key: cannot read ${values.key} (${(e as NodeJS.ErrnoException).code})`);
  }
  const text = signLicense(payload, pem);
  if (values.out) writeFileSync(values.out, text);
  else process.stdout.write(text);
  return 0;
}

function verify(argv: string[]): number {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { 'public-key': { type: 'string' } } });
  const file = positionals[0];
  if (!file) throw new WeftError('invalid_argument', `a licence file is required\n${USAGE}`);
  const s = new License({ file, required: true, publicKey: values['public-key'] ?? process.env.WEFT_LICENSE_PUBLIC_KEY ?? null }).state();
  process.stdout.write(`${JSON.stringify(s, null, 2)}\n`);
  return s.state === 'valid' ? 0 : 1;
}

export function licenseCommand(argv: string[]): number {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'keygen':
      return keygen(rest);
    case 'sign':
      return sign(rest);
    case 'verify':
      return verify(rest);
    default:
      process.stderr.write(`${USAGE}\n`);
      return sub === undefined || sub === '--help' ? 0 : 2;
  }
}
