/** Microseconds since the epoch → ISO 8601 with microseconds and Z, as Weave writes timestamps. */
export function isoFromMicros(us: bigint | number | null): string | null {
  if (us === null || us === undefined) return null
  const b = BigInt(us)
  const ms = b / 1000n
  const micro = Number(((b % 1_000_000n) + 1_000_000n) % 1_000_000n)
  const base = new Date(Number(ms)).toISOString().slice(0, 19)
  return `${base}.${String(micro).padStart(6, '0')}Z`
}
