import fs from 'node:fs/promises'
import path from 'node:path'

/**
 * The safetensors format: an 8-byte little-endian header length, a JSON header naming each tensor's
 * dtype, shape and byte range in the data that follows, then the data. Weights here become float32
 * whatever they are stored as (f32, f16, bf16), since the model computes in float32.
 */
export interface Tensor {
  shape: number[]
  data: Float32Array
}

const DTYPE_BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 }
/** A header larger than this is not a safetensors header (the format itself caps it at 100 MB). */
const MAX_HEADER = 100 * 1024 * 1024

/** Float16 bits to a number (IEEE 754 binary16: subnormals, infinities and NaN included). */
function f16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1
  const exp = (h >> 10) & 0x1f
  const frac = h & 0x3ff
  if (exp === 0) return sign * frac * 2 ** -24
  if (exp === 31) return frac ? NaN : sign * Infinity
  return sign * (1 + frac / 1024) * 2 ** (exp - 15)
}

function toFloat32(dtype: string, bytes: Buffer): Float32Array {
  const n = bytes.length / DTYPE_BYTES[dtype]!
  const out = new Float32Array(n)
  if (dtype === 'F32') {
    for (let i = 0; i < n; i++) out[i] = bytes.readFloatLE(i * 4)
  } else if (dtype === 'F16') {
    for (let i = 0; i < n; i++) out[i] = f16(bytes.readUInt16LE(i * 2))
  } else {
    // bfloat16 is the upper half of a float32.
    const u = new Uint32Array(out.buffer)
    for (let i = 0; i < n; i++) u[i] = bytes.readUInt16LE(i * 2) << 16
  }
  return out
}

/** Reads every tensor of one safetensors file. */
export async function readSafetensors(file: string): Promise<Map<string, Tensor>> {
  const buf = await fs.readFile(file)
  if (buf.length < 8) throw new Error(`${file}: too short for a safetensors file`)
  const headerLen = Number(buf.readBigUInt64LE(0))
  if (headerLen > MAX_HEADER || 8 + headerLen > buf.length) throw new Error(`${file}: bad safetensors header length ${headerLen}`)
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >
  const base = 8 + headerLen
  const out = new Map<string, Tensor>()
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue
    if (!(t.dtype in DTYPE_BYTES)) throw new Error(`${file}: tensor ${name} has dtype ${t.dtype}; f32, f16 and bf16 are supported`)
    const [lo, hi] = t.data_offsets
    const count = t.shape.reduce((a, b) => a * b, 1)
    if (hi - lo !== count * DTYPE_BYTES[t.dtype]! || base + hi > buf.length)
      throw new Error(`${file}: tensor ${name} does not fit its shape`)
    out.set(name, { shape: t.shape, data: toFloat32(t.dtype, buf.subarray(base + lo, base + hi)) })
  }
  return out
}

/**
 * Every tensor of a model directory: `model.safetensors`, or the shards named by
 * `model.safetensors.index.json`.
 */
export async function readModelWeights(dir: string): Promise<Map<string, Tensor>> {
  const index = path.join(dir, 'model.safetensors.index.json')
  let files: string[]
  try {
    const map = JSON.parse(await fs.readFile(index, 'utf8')) as { weight_map: Record<string, string> }
    files = [...new Set(Object.values(map.weight_map))]
    for (const f of files) if (path.basename(f) !== f) throw new Error(`${index}: shard ${f} is not a file name`)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e
    files = ['model.safetensors']
  }
  const all = new Map<string, Tensor>()
  for (const f of files) for (const [k, v] of await readSafetensors(path.join(dir, f))) all.set(k, v)
  return all
}

/** Writes float32 tensors as one safetensors file (names sorted, as the reference writer does). */
export async function writeSafetensors(file: string, tensors: Map<string, Tensor>, metadata: Record<string, string> = {}): Promise<void> {
  const names = [...tensors.keys()].sort()
  const header: Record<string, unknown> = { __metadata__: metadata }
  let offset = 0
  for (const name of names) {
    const t = tensors.get(name)!
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.length * 4] }
    offset += t.data.length * 4
  }
  let json = Buffer.from(JSON.stringify(header), 'utf8')
  // The data starts 8-byte aligned: the header is padded with spaces.
  const pad = (8 - (json.length % 8)) % 8
  json = Buffer.concat([json, Buffer.alloc(pad, 0x20)])
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(json.length))
  const data = Buffer.alloc(offset)
  let at = 0
  for (const name of names) {
    const t = tensors.get(name)!
    for (let i = 0; i < t.data.length; i++, at += 4) data.writeFloatLE(t.data[i]!, at)
  }
  await fs.writeFile(file, Buffer.concat([len, json, data]))
}
