import { formatIp, parseIp } from '../geo/ip.js'

const MAPPED_V4_HIGH = 0xffffn << 32n

/** Canonical text of an address; an IPv4-mapped IPv6 address (how dual-stack sockets report IPv4 peers) becomes IPv4. */
export function canonicalIp(text: string): string {
  const p = parseIp(text)
  if (!p) return text
  if (p.version === 6 && p.value >> 32n === 0xffffn) return formatIp(4, p.value ^ MAPPED_V4_HIGH)
  return formatIp(p.version, p.value)
}

/**
 * The client's address. X-Forwarded-For is believed only when the TCP peer is a configured trusted
 * proxy; then the rightmost address not itself a trusted proxy is the client (entries further left
 * are whatever the client chose to send).
 */
export function clientIpOf(peer: string, forwardedFor: string, trusted: string[]): string {
  const peerIp = canonicalIp(peer)
  if (!forwardedFor || trusted.length === 0 || !trusted.includes(peerIp)) return peerIp
  const hops = forwardedFor.split(',').map((s) => canonicalIp(s.trim()))
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!
    if (!trusted.includes(hop)) return hop
  }
  return hops[0] ?? peerIp
}
