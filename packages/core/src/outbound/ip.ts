import { isIP } from 'node:net';

/** Why an address may not be fetched, or null when it is a public unicast address. */
export function blockedAddressReason(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return blockedIpv4(parseIpv4(address));
  if (family === 6) return blockedIpv6(address);
  return 'not an IP address';
}

function parseIpv4(address: string): number {
  return address.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

const IPV4_BLOCKS: Array<[base: string, bits: number, reason: string]> = [
  ['0.0.0.0', 8, 'the "this network" range 0.0.0.0/8'],
  ['10.0.0.0', 8, 'a private address (10.0.0.0/8)'],
  ['100.64.0.0', 10, 'a carrier-grade NAT address (100.64.0.0/10)'],
  ['127.0.0.0', 8, 'a loopback address (127.0.0.0/8)'],
  ['169.254.0.0', 16, 'a link-local address (169.254.0.0/16, includes cloud metadata services)'],
  ['172.16.0.0', 12, 'a private address (172.16.0.0/12)'],
  ['192.0.0.0', 24, 'an IETF protocol assignment (192.0.0.0/24)'],
  ['192.0.2.0', 24, 'a documentation address (192.0.2.0/24)'],
  ['192.88.99.0', 24, 'a 6to4 relay anycast address (192.88.99.0/24)'],
  ['192.168.0.0', 16, 'a private address (192.168.0.0/16)'],
  ['198.18.0.0', 15, 'a benchmarking address (198.18.0.0/15)'],
  ['198.51.100.0', 24, 'a documentation address (198.51.100.0/24)'],
  ['203.0.113.0', 24, 'a documentation address (203.0.113.0/24)'],
  ['224.0.0.0', 4, 'a multicast address (224.0.0.0/4)'],
  ['240.0.0.0', 4, 'a reserved address (240.0.0.0/4, includes broadcast)'],
];

function blockedIpv4(value: number): string | null {
  for (const [base, bits, reason] of IPV4_BLOCKS) {
    const size = 2 ** (32 - bits);
    const start = parseIpv4(base);
    if (value >= start && value < start + size) return reason;
  }
  return null;
}

/** Eight 16-bit groups; handles `::`, zones and a dotted IPv4 tail (`::ffff:1.2.3.4`). */
function parseIpv6(address: string): number[] {
  let text = address.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    // Rewrite the dotted IPv4 tail as two hex groups, so one parser handles both spellings.
    const v4 = parseIpv4(last);
    text = `${text.slice(0, lastColon + 1)}${Math.floor(v4 / 65536).toString(16)}:${(v4 % 65536).toString(16)}`;
  }
  const groups = (part: string): number[] => (part === '' ? [] : part.split(':').map((p) => parseInt(p, 16)));
  const double = text.indexOf('::');
  if (double < 0) return groups(text);
  const left = groups(text.slice(0, double));
  const right = groups(text.slice(double + 2));
  return [...left, ...new Array<number>(Math.max(0, 8 - left.length - right.length)).fill(0), ...right];
}

function blockedIpv6(address: string): string | null {
  const g = parseIpv6(address);
  if (g.length !== 8) return 'an unparseable IPv6 address';
  const embeddedV4 = (hi: number, lo: number): number => hi * 65536 + lo;
  const allZero = (from: number, to: number): boolean => g.slice(from, to).every((x) => x === 0);
  if (allZero(0, 8)) return 'the unspecified address ::';
  if (allZero(0, 7) && g[7] === 1) return 'the IPv6 loopback address ::1';
  // IPv4-mapped (::ffff:a.b.c.d) and the deprecated IPv4-compatible (::a.b.c.d) forms reach the IPv4 address.
  if (allZero(0, 5) && g[5] === 0xffff) return wrap(blockedIpv4(embeddedV4(g[6], g[7])), 'IPv4-mapped');
  if (allZero(0, 6)) return wrap(blockedIpv4(embeddedV4(g[6], g[7])), 'IPv4-compatible');
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) also carry an IPv4 address that a gateway will connect to.
  if (g[0] === 0x64 && g[1] === 0xff9b && allZero(2, 6)) return wrap(blockedIpv4(embeddedV4(g[6], g[7])), 'NAT64');
  if (g[0] === 0x2002) return wrap(blockedIpv4(embeddedV4(g[1], g[2])), '6to4');
  if ((g[0] & 0xfe00) === 0xfc00) return 'a unique-local IPv6 address (fc00::/7)';
  if ((g[0] & 0xffc0) === 0xfe80) return 'a link-local IPv6 address (fe80::/10)';
  if ((g[0] & 0xffc0) === 0xfec0) return 'a site-local IPv6 address (fec0::/10)';
  if ((g[0] & 0xff00) === 0xff00) return 'a multicast IPv6 address (ff00::/8)';
  if (g[0] === 0x2001 && g[1] === 0x0db8) return 'a documentation IPv6 address (2001:db8::/32)';
  if (g[0] === 0x0100 && allZero(1, 4)) return 'a discard-only IPv6 address (100::/64)';
  return null;
}

function wrap(reason: string | null, form: string): string | null {
  return reason === null ? null : `${reason}, in ${form} IPv6 form`;
}
