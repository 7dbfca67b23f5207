import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Why an address may not be fetched, or null when it is a public unicast address.
 *
 * The range table is ipaddr.js's (maintained against the IANA special-purpose registries): anything it does not call
 * `unicast` is refused. IPv6 forms that carry an IPv4 address a translator or tunnel will connect to (IPv4-mapped,
 * SIIT, IPv4-compatible, NAT64, 6to4, Teredo) are judged by that IPv4 address, so `[::ffff:0:7f00:1]` is loopback.
 */
export function blockedAddressReason(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return blockedIpv4(ipaddr.IPv4.parse(address));
  if (family === 6) {
    const zone = address.indexOf('%');
    let parsed: ipaddr.IPv6;
    try {
      parsed = ipaddr.IPv6.parse(zone >= 0 ? address.slice(0, zone) : address);
    } catch {
      return 'an unparseable IPv6 address';
    }
    return blockedIpv6(parsed);
  }
  return 'not an IP address';
}

const IPV4_REASONS: Record<string, string> = {
  unspecified: 'the "this network" range 0.0.0.0/8',
  broadcast: 'the broadcast address',
  multicast: 'a multicast address (224.0.0.0/4)',
  linkLocal: 'a link-local address (169.254.0.0/16, includes cloud metadata services)',
  loopback: 'a loopback address (127.0.0.0/8)',
  carrierGradeNat: 'a carrier-grade NAT address (100.64.0.0/10)',
  private: 'a private address (10/8, 172.16/12, 192.168/16)',
  reserved: 'a reserved, documentation or benchmarking address',
  as112: 'an AS112 sink address',
  amt: 'an AMT relay address',
};

function blockedIpv4(ip: ipaddr.IPv4): string | null {
  const range = ip.range();
  if (range === 'unicast') return null;
  return IPV4_REASONS[range] ?? `a special-purpose address (${range})`;
}

const IPV6_REASONS: Record<string, string> = {
  unspecified: 'the unspecified address ::',
  loopback: 'the IPv6 loopback address ::1',
  linkLocal: 'a link-local IPv6 address (fe80::/10)',
  multicast: 'a multicast IPv6 address (ff00::/8)',
  uniqueLocal: 'a unique-local IPv6 address (fc00::/7)',
  deprecatedSiteLocal: 'a site-local IPv6 address (fec0::/10)',
  discard: 'a discard-only IPv6 address (100::/64)',
  reserved: 'a reserved or documentation IPv6 address',
  benchmarking: 'a benchmarking IPv6 address (2001:2::/48)',
};

/** The IPv4 address an IPv6 form embeds, with the form's name; null when it embeds none. */
function embeddedIpv4(ip: ipaddr.IPv6): Array<{ v4: ipaddr.IPv4; form: string }> | null {
  const g = ip.parts;
  const v4 = (hi: number, lo: number): ipaddr.IPv4 => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  const zero = (from: number, to: number): boolean => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && g[5] === 0xffff) return [{ v4: v4(g[6]!, g[7]!), form: 'IPv4-mapped' }];
  // SIIT (RFC 6145): ::ffff:0:a.b.c.d
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return [{ v4: v4(g[6]!, g[7]!), form: 'IPv4-translated (SIIT)' }];
  // The deprecated IPv4-compatible form ::a.b.c.d (:: and ::1 themselves are ranges of their own).
  if (zero(0, 6) && !(g[6] === 0 && g[7]! <= 1)) return [{ v4: v4(g[6]!, g[7]!), form: 'IPv4-compatible' }];
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return [{ v4: v4(g[6]!, g[7]!), form: 'NAT64' }];
  if (g[0] === 0x2002) return [{ v4: v4(g[1]!, g[2]!), form: '6to4' }];
  // Teredo (RFC 4380): the server in bits 32-63, the client (what a relay connects to) bit-inverted in bits 96-127.
  if (g[0] === 0x2001 && g[1] === 0) {
    return [
      { v4: v4(g[2]!, g[3]!), form: 'Teredo server' },
      { v4: v4(~g[6]! & 0xffff, ~g[7]! & 0xffff), form: 'Teredo' },
    ];
  }
  return null;
}

function blockedIpv6(ip: ipaddr.IPv6): string | null {
  const range = ip.range();
  if (range === 'unspecified' || range === 'loopback') return IPV6_REASONS[range]!;
  const embedded = embeddedIpv4(ip);
  if (embedded) {
    for (const { v4, form } of embedded) {
      const reason = blockedIpv4(v4);
      if (reason !== null) return `${reason}, in ${form} IPv6 form`;
    }
    return null;
  }
  // The local-use NAT64 prefix (RFC 8215) belongs to one network's translator, and where in the address it puts the
  // IPv4 address is that network's choice: like a private range, it is not a public destination.
  if (ip.match(ipaddr.IPv6.parse('64:ff9b:1::'), 48)) return 'a local-use NAT64 address (64:ff9b:1::/48)';
  if (ip.match(ipaddr.IPv6.parse('64:ff9b::'), 32)) return 'an address in the NAT64 block outside 64:ff9b::/96';
  if (range === 'unicast') return null;
  return IPV6_REASONS[range] ?? `a special-purpose IPv6 address (${range})`;
}
