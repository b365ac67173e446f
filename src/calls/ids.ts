import { randomBytes } from 'node:crypto'

// Weave accepts OTel-style hex ids or canonical lowercase UUIDs (docs/calls-and-storage.md).
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const HEX16 = /^[0-9a-f]{16}$/
const HEX32 = /^[0-9a-f]{32}$/

export function isCallId(s: string): boolean {
  return HEX16.test(s) || UUID.test(s)
}

export function isTraceId(s: string): boolean {
  return HEX32.test(s) || UUID.test(s)
}

/** A UUIDv7 (time-ordered), what Weave servers and SDKs generate for calls and traces. */
export function uuidv7(now = Date.now()): string {
  const b = randomBytes(16)
  const ms = BigInt(now)
  for (let i = 0; i < 6; i++) b[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn)
  b[6] = (b[6]! & 0x0f) | 0x70
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = b.toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}
