import { validationError } from './errors.js'

/** A JSON request body; malformed or empty → 422 in the validation-error shape, with the byte position. */
export function parseJson(buf: Buffer | Uint8Array): unknown {
  if (buf.length === 0) {
    throw validationError([{ loc: ['body'], msg: 'Field required', type: 'missing' }])
  }
  try {
    return JSON.parse(Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString('utf8'))
  } catch (e) {
    const msg = (e as Error).message
    const pos = /position (\d+)/.exec(msg)
    throw validationError([{ loc: ['body', pos ? Number(pos[1]) : 0], msg: `JSON decode error: ${msg}`, type: 'json_invalid' }])
  }
}
