/**
 * Which IP addresses a server-side fetch may connect to. Every textual form is
 * reduced to bytes first (IPv4: 4 bytes; IPv6: 16), and IPv6 forms that carry
 * an IPv4 address — mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64
 * `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4 `2002::/16` — are judged by that
 * IPv4 address, so `[::ffff:7f00:1]` is loopback like `127.0.0.1`. Hostnames
 * in numeric IPv4 shorthand (`2130706433`, `0177.1`, `0x7f.1`) reach here
 * already normalised by the WHATWG URL parser.
 *
 * Refused: unspecified, loopback, private (RFC 1918, ULA fc00::/7), link-local
 * (169.254/16 with the 169.254.169.254 metadata address, fe80::/10), CGNAT
 * (100.64/10), multicast, broadcast and reserved/documentation ranges, Teredo
 * (2001::/32, whose embedded IPv4 is obfuscated) and site-local fec0::/10.
 * fd00:ec2::254 (a cloud metadata address) falls in fc00::/7.
 */
import { isIP } from 'node:net';

/** `ip` as 4 or 16 bytes, or null when it is not an IP literal. */
export function ipBytes(ip: string): number[] | null {
  const s = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const fam = isIP(s);
  if (fam === 4) return s.split('.').map(Number);
  if (fam !== 6) return null;
  let head = s;
  let v4: number[] = [];
  const m = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (m) {
    head = `${m[1]}0:0`;
    v4 = m[2]!.split('.').map(Number);
  }
  const [l, r] = head.includes('::') ? head.split('::') as [string, string] : [head, undefined];
  const parts = (x: string): number[] => (x ? x.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parts(l);
  const right = r === undefined ? [] : parts(r);
  const groups = r === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = groups.flatMap((g) => [g >> 8, g & 0xff]);
  if (v4.length) bytes.splice(12, 4, ...v4);
  return bytes;
}

function v4Forbidden([a, b, c]: number[]): boolean {
  return (
    a === 0 || a === 10 || a === 127 || a! >= 224 || // this network, private, loopback, multicast, reserved, broadcast
    (a === 100 && b! >= 64 && b! < 128) || // CGNAT
    (a === 169 && b === 254) || // link-local, cloud metadata 169.254.169.254
    (a === 172 && b! >= 16 && b! < 32) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && (c === 0 || c === 2)) || // IETF protocol assignments, TEST-NET-1
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    (a === 198 && b === 51 && c === 100) ||
    (a === 203 && b === 0 && c === 113)
  );
}

/** The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64, 6to4), else null. */
function embeddedV4(x: number[]): number[] | null {
  const zero = (from: number, to: number): boolean => x.slice(from, to).every((v) => v === 0);
  if (zero(0, 10) && x[10] === 0xff && x[11] === 0xff) return x.slice(12); // ::ffff:a.b.c.d
  if (zero(0, 10) && x[10] === 0 && x[11] === 0 && !zero(12, 16)) return x.slice(12); // ::a.b.c.d (and ::1: judged as 0.0.0.1)
  if (x[0] === 0 && x[1] === 0x64 && x[2] === 0xff && x[3] === 0x9b) return x.slice(12); // 64:ff9b::/96, 64:ff9b:1::/48
  if (x[0] === 0x20 && x[1] === 0x02) return x.slice(2, 6); // 6to4
  return null;
}

/** True when a fetch must not connect to `ip` (any textual IPv4/IPv6 form); non-IP input is refused too. */
export function isForbiddenAddress(ip: string): boolean {
  const x = ipBytes(ip);
  if (!x) return true;
  if (x.length === 4) return v4Forbidden(x);
  if (x.every((v) => v === 0)) return true; // ::
  if (x.slice(0, 15).every((v) => v === 0) && x[15] === 1) return true; // ::1
  const v4 = embeddedV4(x);
  if (v4) return v4Forbidden(v4);
  const [a, b] = x as [number, number];
  return (
    (a & 0xfe) === 0xfc || // fc00::/7 unique local (fd00:ec2::254 metadata)
    (a === 0xfe && (b & 0xc0) === 0x80) || // fe80::/10 link-local
    (a === 0xfe && (b & 0xc0) === 0xc0) || // fec0::/10 site-local
    a === 0xff || // multicast
    (a === 0x20 && b === 0x01 && x[2] === 0 && x[3] === 0) || // Teredo 2001::/32
    (a === 0x20 && b === 0x01 && x[2] === 0x0d && x[3] === 0xb8) || // documentation 2001:db8::/32
    (a === 0x01 && b === 0 && x.slice(2, 8).every((v) => v === 0)) // discard 100::/64
  );
}
