import fs from 'node:fs/promises'
import path from 'node:path'
import { readModelWeights, type Tensor } from '../src/inference/safetensors.js'

/**
 * Writes a Hugging Face Llama/Qwen2 directory (as weft loads it) as a GGUF file for llama.cpp, in
 * float32, so the inference bench's peer runs the very same weights. Facts of the format used here:
 * GGUF v3 layout, llama.cpp's tensor names, and its conversion's reordering of the q/k rows of
 * Llama models (llama.cpp rotates adjacent pairs; Hugging Face rotates the two halves of a head —
 * Qwen2 is loaded with the halves convention and is not reordered).
 */
const T = { U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const
const ALIGN = 32

class Writer {
  private chunks: Buffer[] = []
  length = 0
  push(b: Buffer): void {
    this.chunks.push(b)
    this.length += b.length
  }
  u32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeUInt32LE(v)
    this.push(b)
  }
  i32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeInt32LE(v)
    this.push(b)
  }
  u64(v: number | bigint): void {
    const b = Buffer.alloc(8)
    b.writeBigUInt64LE(BigInt(v))
    this.push(b)
  }
  f32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeFloatLE(v)
    this.push(b)
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8')
    this.u64(b.length)
    this.push(b)
  }
  pad(): void {
    const n = (ALIGN - (this.length % ALIGN)) % ALIGN
    if (n) this.push(Buffer.alloc(n))
  }
  get buffer(): Buffer {
    return Buffer.concat(this.chunks)
  }
}

type Value =
  { t: 'u32' | 'i32' | 'f32' | 'bool' | 'str'; v: number | boolean | string } | { t: 'arr'; of: 'str' | 'i32'; v: (string | number)[] }

function writeKv(w: Writer, key: string, val: Value): void {
  w.str(key)
  switch (val.t) {
    case 'u32':
      ;(w.u32(T.U32), w.u32(val.v as number))
      break
    case 'i32':
      ;(w.u32(T.I32), w.i32(val.v as number))
      break
    case 'f32':
      ;(w.u32(T.F32), w.f32(val.v as number))
      break
    case 'bool':
      ;(w.u32(T.BOOL), w.push(Buffer.from([val.v ? 1 : 0])))
      break
    case 'str':
      ;(w.u32(T.STRING), w.str(val.v as string))
      break
    case 'arr':
      w.u32(T.ARRAY)
      w.u32(val.of === 'str' ? T.STRING : T.I32)
      w.u64(val.v.length)
      for (const x of val.v) val.of === 'str' ? w.str(x as string) : w.i32(x as number)
  }
}

/** Rows of a q/k projection reordered from halves-of-a-head to adjacent pairs, per head. */
function pairRows(t: Tensor, heads: number): Tensor {
  const [out, inp] = t.shape as [number, number]
  const d = out / heads
  const data = new Float32Array(t.data.length)
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < d / 2; i++) {
      for (const half of [0, 1]) {
        const from = h * d + half * (d / 2) + i
        const to = h * d + 2 * i + half
        data.set(t.data.subarray(from * inp, (from + 1) * inp), to * inp)
      }
    }
  }
  return { shape: t.shape, data }
}

export async function writeGguf(modelDir: string, file: string): Promise<void> {
  const cfg = JSON.parse(await fs.readFile(path.join(modelDir, 'config.json'), 'utf8'))
  const tok = JSON.parse(await fs.readFile(path.join(modelDir, 'tokenizer.json'), 'utf8'))
  const weights = await readModelWeights(modelDir)
  const arch = cfg.model_type === 'qwen2' ? 'qwen2' : 'llama'
  const heads = cfg.num_attention_heads
  const kvHeads = cfg.num_key_value_heads ?? heads
  const headDim = cfg.head_dim ?? cfg.hidden_size / heads
  const vocab: string[] = new Array(cfg.vocab_size).fill('')
  const types: number[] = new Array(cfg.vocab_size).fill(1)
  for (const [t, id] of Object.entries(tok.model.vocab as Record<string, number>)) vocab[id] = t
  for (const a of tok.added_tokens as { id: number; content: string; special: boolean }[]) {
    vocab[a.id] = a.content
    types[a.id] = a.special ? 3 : 4
  }
  for (let i = 0; i < vocab.length; i++) if (!vocab[i]) vocab[i] = `[PAD${i}]`
  const eos = Array.isArray(cfg.eos_token_id) ? cfg.eos_token_id[0] : cfg.eos_token_id
  const kv: [string, Value][] = [
    ['general.architecture', { t: 'str', v: arch }],
    ['general.name', { t: 'str', v: path.basename(modelDir) }],
    ['general.alignment', { t: 'u32', v: ALIGN }],
    [`${arch}.context_length`, { t: 'u32', v: cfg.max_position_embeddings }],
    [`${arch}.embedding_length`, { t: 'u32', v: cfg.hidden_size }],
    [`${arch}.block_count`, { t: 'u32', v: cfg.num_hidden_layers }],
    [`${arch}.feed_forward_length`, { t: 'u32', v: cfg.intermediate_size }],
    [`${arch}.attention.head_count`, { t: 'u32', v: heads }],
    [`${arch}.attention.head_count_kv`, { t: 'u32', v: kvHeads }],
    [`${arch}.rope.dimension_count`, { t: 'u32', v: headDim }],
    [`${arch}.rope.freq_base`, { t: 'f32', v: cfg.rope_theta ?? 10000 }],
    [`${arch}.attention.layer_norm_rms_epsilon`, { t: 'f32', v: cfg.rms_norm_eps ?? 1e-6 }],
    ['tokenizer.ggml.model', { t: 'str', v: 'gpt2' }],
    ['tokenizer.ggml.pre', { t: 'str', v: 'gpt-2' }],
    ['tokenizer.ggml.tokens', { t: 'arr', of: 'str', v: vocab }],
    ['tokenizer.ggml.token_type', { t: 'arr', of: 'i32', v: types }],
    ['tokenizer.ggml.merges', { t: 'arr', of: 'str', v: tok.model.merges as string[] }],
    ['tokenizer.ggml.eos_token_id', { t: 'u32', v: eos }],
    ['tokenizer.ggml.add_bos_token', { t: 'bool', v: false }],
  ]
  const tensors: [string, Tensor][] = []
  const add = (name: string, hf: string, transform?: (t: Tensor) => Tensor) => {
    const t = weights.get(hf)
    if (t) tensors.push([name, transform ? transform(t) : t])
  }
  add('token_embd.weight', 'model.embed_tokens.weight')
  add('output_norm.weight', 'model.norm.weight')
  if (!cfg.tie_word_embeddings) add('output.weight', 'lm_head.weight')
  const reorder = arch === 'llama'
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`
    add(`blk.${l}.attn_norm.weight`, p + 'input_layernorm.weight')
    add(`blk.${l}.attn_q.weight`, p + 'self_attn.q_proj.weight', reorder ? (t) => pairRows(t, heads) : undefined)
    add(`blk.${l}.attn_k.weight`, p + 'self_attn.k_proj.weight', reorder ? (t) => pairRows(t, kvHeads) : undefined)
    add(`blk.${l}.attn_v.weight`, p + 'self_attn.v_proj.weight')
    add(`blk.${l}.attn_q.bias`, p + 'self_attn.q_proj.bias')
    add(`blk.${l}.attn_k.bias`, p + 'self_attn.k_proj.bias')
    add(`blk.${l}.attn_v.bias`, p + 'self_attn.v_proj.bias')
    add(`blk.${l}.attn_output.weight`, p + 'self_attn.o_proj.weight')
    add(`blk.${l}.ffn_norm.weight`, p + 'post_attention_layernorm.weight')
    add(`blk.${l}.ffn_gate.weight`, p + 'mlp.gate_proj.weight')
    add(`blk.${l}.ffn_up.weight`, p + 'mlp.up_proj.weight')
    add(`blk.${l}.ffn_down.weight`, p + 'mlp.down_proj.weight')
  }
  const w = new Writer()
  w.u32(0x46554747)
  w.u32(3)
  w.u64(tensors.length)
  w.u64(kv.length)
  for (const [k, v] of kv) writeKv(w, k, v)
  let offset = 0
  for (const [name, t] of tensors) {
    w.str(name)
    w.u32(t.shape.length)
    // ggml lists dimensions innermost first.
    for (const d of [...t.shape].reverse()) w.u64(d)
    w.u32(0)
    w.u64(offset)
    offset += Math.ceil((t.data.length * 4) / ALIGN) * ALIGN
  }
  w.pad()
  for (const [, t] of tensors) {
    w.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))
    w.pad()
  }
  await fs.writeFile(file, w.buffer)
}
