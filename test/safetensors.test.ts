import t from 'tap'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { tempDir } from './helpers/server.js'
import { readModelWeights, readSafetensors, writeSafetensors } from '../src/inference/safetensors.js'

/** A safetensors file by hand: header, then raw little-endian data of the given dtype. */
async function writeRaw(file: string, tensors: Record<string, { dtype: string; shape: number[]; bytes: Buffer }>): Promise<void> {
  const header: Record<string, unknown> = {}
  let at = 0
  for (const [name, x] of Object.entries(tensors)) {
    header[name] = { dtype: x.dtype, shape: x.shape, data_offsets: [at, at + x.bytes.length] }
    at += x.bytes.length
  }
  const json = Buffer.from(JSON.stringify(header))
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(json.length))
  await writeFile(file, Buffer.concat([len, json, ...Object.values(tensors).map((x) => x.bytes)]))
}

const u16 = (xs: number[]) => {
  const b = Buffer.alloc(xs.length * 2)
  xs.forEach((x, i) => b.writeUInt16LE(x, i * 2))
  return b
}

t.test('f16 and bf16 become float32; sharded directories follow their index', async (t) => {
  const dir = tempDir('weft-st-')
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  // f16: 1.0 = 0x3c00, -2.0 = 0xc000, 0.5 = 0x3800, 65504 = 0x7bff, smallest subnormal 0x0001 = 2^-24
  // bf16: the upper halves of float32 1.0 (0x3f80), -2.0 (0xc000), 3.140625 (0x4049)
  await writeRaw(path.join(dir, 'a.safetensors'), {
    h: { dtype: 'F16', shape: [5], bytes: u16([0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001]) },
  })
  await writeRaw(path.join(dir, 'b.safetensors'), {
    b: { dtype: 'BF16', shape: [3], bytes: u16([0x3f80, 0xc000, 0x4049]) },
  })
  await writeFile(
    path.join(dir, 'model.safetensors.index.json'),
    JSON.stringify({ weight_map: { h: 'a.safetensors', b: 'b.safetensors' } }),
  )
  const w = await readModelWeights(dir)
  t.same([...w.get('h')!.data], [1, -2, 0.5, 65504, 2 ** -24])
  t.same([...w.get('b')!.data], [1, -2, 3.140625])
  t.same(w.get('b')!.shape, [3])

  await writeFile(path.join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { h: '../escape.safetensors' } }))
  await t.rejects(readModelWeights(dir), /not a file name/, 'shards must be files of the directory')

  const one = path.join(dir, 'one')
  await mkdir(one)
  await writeSafetensors(path.join(one, 'model.safetensors'), new Map([['x', { shape: [2, 2], data: Float32Array.from([1, 2, 3, 4.5]) }]]))
  t.same([...(await readModelWeights(one)).get('x')!.data], [1, 2, 3, 4.5], 'a single file, round-trip')
  await writeRaw(path.join(dir, 'bad.safetensors'), { q: { dtype: 'I8', shape: [1], bytes: Buffer.from([1]) } })
  await t.rejects(readSafetensors(path.join(dir, 'bad.safetensors')), /dtype I8/)
  await writeFile(path.join(dir, 'short.safetensors'), Buffer.from([1, 2, 3]))
  await t.rejects(readSafetensors(path.join(dir, 'short.safetensors')), /too short/)
})
