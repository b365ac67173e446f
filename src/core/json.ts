import { isAscii } from 'node:buffer'
import { validationError } from './errors.js'

/** A JSON request body; malformed or empty → 422 in the validation-error shape, with the byte position. */
export function parseJson(buf: Buffer | Uint8Array): unknown {
  if (buf.length === 0) {
    throw validationError([{ loc: ['body'], msg: 'Field required', type: 'missing' }])
  }
  try {
    const bytes = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength)
    // ASCII bytes are the same text in Latin-1, which decodes as a plain copy: Node's UTF-8 decoder took 40-150 ms
    // for a 10 MB dataset chunk against ~1-2 for the check and the copy (Node 20).
    return JSON.parse(isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8'))
  } catch (e) {
    const msg = (e as Error).message
    const pos = /position (\d+)/.exec(msg)
    throw validationError([{ loc: ['body', pos ? Number(pos[1]) : 0], msg: `JSON decode error: ${msg}`, type: 'json_invalid' }])
  }
}
