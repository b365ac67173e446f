import { createHash } from 'node:crypto'

// Weave's digests, for tests' expected values, written here from its description (not by calling the server's code):
// row digest = base64url(sha256(json.dumps(row))) with '-'→'X', '_'→'Y', no padding, where json.dumps
// uses ", " and ": ", keys as given, non-ASCII as \uXXXX; table digest = hex sha256 of the row digests joined.
export function dumps(v: unknown): string {
  if (v === null) return 'null'
  if (typeof v === 'string')
    return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'))
  if (typeof v === 'number') {
    if (Number.isInteger(v)) return String(v)
    const [m, e] = v.toExponential().split('e') as [string, string]
    return Math.abs(Number(e)) > 4 && Number(e) < 0 ? `${m}e-${String(-Number(e)).padStart(2, '0')}` : String(v)
  }
  if (typeof v === 'boolean') return String(v)
  if (Array.isArray(v)) return '[' + v.map(dumps).join(', ') + ']'
  return (
    '{' +
    Object.entries(v as object)
      .map(([k, x]) => `${dumps(k)}: ${dumps(x)}`)
      .join(', ') +
    '}'
  )
}
export const rowDigest = (row: unknown) =>
  createHash('sha256')
    .update(dumps(row))
    .digest('base64')
    .replace(/=+$/, '')
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/-/g, 'X')
    .replace(/_/g, 'Y')
export const tableDigest = (rowDigests: string[]) => createHash('sha256').update(rowDigests.join('')).digest('hex')
