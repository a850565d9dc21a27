import { BlockList, isIP } from 'node:net';

/**
 * Addresses a webhook is not sent to unless WEBDATA_ALLOWED_HOSTS lists them (docs/notifications.md#where-a-webhook-may-point):
 * this machine, the networks around it (a cloud's metadata service at 169.254.169.254, private and carrier-grade NAT
 * ranges) and the ranges nothing public answers at. A pipeline file chooses its webhooks' URLs, and the body carries
 * the run's queries: without this, a file could have the run POST to services only this machine can reach.
 * By kind, as messages name them; the first that holds is said.
 */
const RANGES: ReadonlyArray<readonly [kind: string, subnets: readonly string[]]> = [
  ['unspecified', ['0.0.0.0/8', '::/128']],
  ['loopback', ['127.0.0.0/8', '::1/128']],
  ['private (RFC 1918)', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']],
  ['shared (carrier-grade NAT, 100.64.0.0/10)', ['100.64.0.0/10']],
  ['link-local', ['169.254.0.0/16', 'fe80::/10']],
  ['unique-local (fc00::/7)', ['fc00::/7']],
  ['site-local (deprecated)', ['fec0::/10']],
  ['multicast', ['224.0.0.0/4', 'ff00::/8']],
  ['documentation', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24', '2001:db8::/32', '3fff::/20']],
  ['benchmarking', ['198.18.0.0/15', '2001:2::/48']],
  [
    'reserved',
    // IETF assignments, the 6to4 relay, class E and broadcast; IPv4-compatible IPv6, discard, local NAT64, Teredo, 6to4
    // (the last ones reach IPv4 addresses this check could not see).
    ['192.0.0.0/24', '192.88.99.0/24', '240.0.0.0/4', '::/96', '100::/64', '64:ff9b:1::/48', '2001::/32', '2002::/16'],
  ],
];

let lists: ReadonlyArray<readonly [string, BlockList]> | undefined;

/**
 * The kind of special address `address` (an IPv4 or IPv6 address, without brackets) is, or undefined for an
 * ordinary public one. An IPv4 address written as IPv6 — mapped (`::ffff:10.0.0.1`) or through the well-known NAT64
 * prefix (`64:ff9b::a00:1`) — is the IPv4 address it stands for.
 */
export function specialAddress(address: string): string | undefined {
  const family = isIP(address);
  if (family === 0) return undefined;
  lists ??= RANGES.map(([kind, subnets]) => {
    const list = new BlockList();
    for (const subnet of subnets) {
      const [network, prefix] = subnet.split('/') as [string, string];
      list.addSubnet(network, Number(prefix), isIP(network) === 6 ? 'ipv6' : 'ipv4');
    }
    return [kind, list] as const;
  });
  const type = family === 6 ? 'ipv6' : 'ipv4';
  // BlockList reads IPv4-mapped IPv6 as the IPv4 address itself; NAT64 it does not.
  const embedded = family === 6 ? nat64(address) : undefined;
  for (const [kind, list] of lists) {
    if (list.check(address, type) || (embedded !== undefined && list.check(embedded, 'ipv4'))) return kind;
  }
  return undefined;
}

/** The IPv4 address behind the well-known NAT64 prefix 64:ff9b::/96, or undefined. */
function nat64(address: string): string | undefined {
  const words = ipv6Words(address);
  if (words === undefined || words[0] !== 0x64 || words[1] !== 0xff9b || words.slice(2, 6).some((word) => word !== 0)) return undefined;
  const [high, low] = [words[6] as number, words[7] as number];
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/** An IPv6 address's eight 16-bit words (a trailing dotted IPv4 part included), or undefined if it is not one. */
function ipv6Words(address: string): number[] | undefined {
  if (isIP(address) !== 6) return undefined;
  let text = address.toLowerCase().replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const words = (part: string) => (part === '' ? [] : part.split(':').map((word) => Number.parseInt(word, 16)));
  const [front, back] = [words(head), words(tail ?? '')];
  return tail === undefined ? front : [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/** "a private (RFC 1918) address", "an unspecified address": a kind as a message says it. */
export function anAddressOf(kind: string): string {
  return `${/^(?:[aeio]|un(?!ique))/i.test(kind) ? 'an' : 'a'} ${kind} address`;
}
