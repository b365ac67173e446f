import * as tf from '@tensorflow/tfjs-core'
import type { Tensor } from './safetensors.js'
import { KVCache, type Step } from './kv-cache.js'
import { Workspace, block, product, rmsNorm, type Dims, type Layer } from './llama-layers.js'
import { gatherInto } from './workspace.js'
import { rotationOf } from './attention.js'

/** The fields of a Hugging Face `config.json` the Llama family (Llama, Mistral, Qwen2) needs. */
export interface LlamaConfig {
  model_type?: string
  architectures?: string[]
  hidden_size: number
  intermediate_size: number
  num_hidden_layers: number
  num_attention_heads: number
  num_key_value_heads?: number
  head_dim?: number
  rms_norm_eps?: number
  rope_theta?: number
  rope_scaling?: Record<string, unknown> | null
  tie_word_embeddings?: boolean
  vocab_size: number
  max_position_embeddings?: number
  attention_bias?: boolean
  hidden_act?: string
  sliding_window?: number | null
}

/**
 * Rotary embedding frequencies with the config's rope_scaling — default, linear, dynamic (NTK, with
 * the fixed base vLLM derives for the scaled length), llama3, yarn — and the factor the cosines and
 * sines are scaled by (YaRN's attention factor; 1 otherwise).
 */
export function rope(c: LlamaConfig, headDim: number): { invFreq: Float32Array; scale: number } {
  let theta = c.rope_theta ?? 10000
  const half = headDim / 2
  const s = c.rope_scaling
  const type = s ? String(s.rope_type ?? s.type ?? 'default') : 'default'
  const f = s ? Number(s.factor ?? 1) : 1
  // vLLM's dynamic NTK: the base for the scaled length L·f, fixed (L·f·f/L − (f − 1) = f² − f + 1).
  if (type === 'dynamic') theta *= (f * f - (f - 1)) ** (headDim / (headDim - 2))
  const inv = new Float64Array(half)
  for (let i = 0; i < half; i++) inv[i] = 1 / theta ** ((2 * i) / headDim)
  let scale = 1
  if (type === 'linear') {
    for (let i = 0; i < half; i++) inv[i]! /= f
  } else if (type === 'llama3') {
    const lowF = Number(s!.low_freq_factor ?? 1)
    const highF = Number(s!.high_freq_factor ?? 4)
    const old = Number(s!.original_max_position_embeddings ?? 8192)
    const lowWave = old / lowF
    const highWave = old / highF
    for (let i = 0; i < half; i++) {
      const wave = (2 * Math.PI) / inv[i]!
      if (wave < highWave) continue
      if (wave > lowWave) inv[i]! /= f
      else {
        const smooth = (old / wave - lowF) / (highF - lowF)
        inv[i] = (1 - smooth) * (inv[i]! / f) + smooth * inv[i]!
      }
    }
  } else if (type === 'yarn') {
    const old = Number(s!.original_max_position_embeddings ?? c.max_position_embeddings ?? 2048)
    const fast = Number(s!.beta_fast ?? 32)
    const slow = Number(s!.beta_slow ?? 1)
    // The dimension whose wavelength makes `turns` full turns over the original context.
    const dimOf = (turns: number) => (headDim * Math.log(old / (turns * 2 * Math.PI))) / (2 * Math.log(theta))
    const lo = Math.max(Math.floor(dimOf(fast)), 0)
    let hi = Math.min(Math.ceil(dimOf(slow)), headDim - 1)
    if (lo === hi) hi += 0.001
    for (let i = 0; i < half; i++) {
      const ramp = Math.min(1, Math.max(0, (i - lo) / (hi - lo)))
      const keep = 1 - ramp
      inv[i] = (inv[i]! / f) * (1 - keep) + inv[i]! * keep
    }
    scale = s!.attention_factor !== undefined ? Number(s!.attention_factor) : f > 1 ? 0.1 * Math.log(f) + 1 : 1
  } else if (type !== 'default' && type !== 'dynamic') {
    throw new Error(`rope_scaling type ${type} is not supported (default, linear, dynamic, llama3 and yarn are)`)
  }
  return { invFreq: Float32Array.from(inv), scale }
}

/** The checkpoint's tensors by Hugging Face name, shape-checked, as TF.js tensors. */
function weightReader(w: Map<string, Tensor>) {
  const get = (name: string, shape?: number[]): Tensor => {
    const t = w.get(name)
    if (!t) throw new Error(`weight ${name} is missing`)
    if (shape && (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])))
      throw new Error(`weight ${name} has shape [${t.shape}], expected [${shape}]`)
    return t
  }
  // Norm weights and biases stay in JS memory (llama-layers.ts applies them there).
  const vec = (name: string, n: number) => Float32Array.from(get(name, [n]).data)
  const opt = (name: string, n: number) => (w.has(name) ? vec(name, n) : null)
  // HF linear weights are [out, in]; transposed once here.
  const lin = (name: string, out: number, inp: number) => tf.tidy(() => tf.transpose(tf.tensor2d(get(name, [out, inp]).data, [out, inp])))
  return { has: (name: string) => w.has(name), get, vec, opt, lin }
}

type WeightReader = ReturnType<typeof weightReader>

function concatArrays(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** The given rows of x ([?, width]) in that order, into out. */
function pickRows(x: Float32Array, rows: number[], width: number, out: Float32Array): Float32Array {
  rows.forEach((r, i) => out.set(x.subarray(r * width, (r + 1) * width), i * width))
  return out
}

/** Layer l's weights, q/k/v and gate/up side by side (see Layer). */
function loadLayer(r: WeightReader, c: LlamaConfig, d: Dims, l: number): Layer {
  const H = c.hidden_size
  const q = d.heads * d.headDim
  const kv = d.kvHeads * d.headDim
  const p = `model.layers.${l}`
  const side = (ts: tf.Tensor[], axis: number) => {
    const out = tf.concat(ts, axis)
    for (const t of ts) t.dispose()
    return out
  }
  const biases = [r.opt(`${p}.self_attn.q_proj.bias`, q), r.opt(`${p}.self_attn.k_proj.bias`, kv), r.opt(`${p}.self_attn.v_proj.bias`, kv)]
  const sizes = [q, kv, kv]
  return {
    inNorm: r.vec(`${p}.input_layernorm.weight`, H),
    postNorm: r.vec(`${p}.post_attention_layernorm.weight`, H),
    wqkv: side(
      [
        r.lin(`${p}.self_attn.q_proj.weight`, q, H),
        r.lin(`${p}.self_attn.k_proj.weight`, kv, H),
        r.lin(`${p}.self_attn.v_proj.weight`, kv, H),
      ],
      1,
    ) as tf.Tensor2D,
    bqkv: biases.some((b) => b) ? concatArrays(biases.map((b, i) => b ?? new Float32Array(sizes[i]!))) : null,
    wo: r.lin(`${p}.self_attn.o_proj.weight`, H, q),
    gateUp: side(
      [r.lin(`${p}.mlp.gate_proj.weight`, c.intermediate_size, H), r.lin(`${p}.mlp.up_proj.weight`, c.intermediate_size, H)],
      1,
    ) as tf.Tensor2D,
    down: r.lin(`${p}.mlp.down_proj.weight`, H, c.intermediate_size),
  }
}

/**
 * A decoder-only transformer of the Llama family in TF.js: RMSNorm, rotary embeddings (rotate-half),
 * grouped-query attention, SwiGLU MLP, optional q/k/v biases (Qwen2), tied or separate output head.
 * Several sequences go through one pass: their new tokens are stacked for every dense product;
 * attention runs per sequence against its own cache (the layers' parts are in llama-layers.ts).
 */
export class LlamaModel {
  readonly heads: number
  readonly kvHeads: number
  readonly headDim: number
  readonly maxPositions: number
  private readonly dims: Dims
  private readonly embed: tf.Tensor2D
  /** The output head transposed ([hidden, vocab]). */
  private readonly head: tf.Tensor2D
  private readonly layers: Layer[]
  private readonly norm: Float32Array
  private readonly invFreq: Float32Array
  private readonly ropeScale: number
  private readonly workspace = new Workspace()

  private constructor(
    readonly config: LlamaConfig,
    w: Map<string, Tensor>,
  ) {
    const c = config
    this.heads = c.num_attention_heads
    this.kvHeads = c.num_key_value_heads ?? c.num_attention_heads
    this.headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads
    this.maxPositions = c.max_position_embeddings ?? 2048
    this.dims = { heads: this.heads, kvHeads: this.kvHeads, headDim: this.headDim, eps: c.rms_norm_eps ?? 1e-6 }
    if (c.hidden_act && c.hidden_act !== 'silu') throw new Error(`hidden_act ${c.hidden_act} is not supported (silu is)`)
    if (this.heads % this.kvHeads !== 0) throw new Error('num_attention_heads must be a multiple of num_key_value_heads')
    const r = weightReader(w)
    const H = c.hidden_size
    this.embed = tf.tensor2d(r.get('model.embed_tokens.weight', [c.vocab_size, H]).data, [c.vocab_size, H])
    this.head =
      r.has('lm_head.weight') && !c.tie_word_embeddings ? r.lin('lm_head.weight', c.vocab_size, H) : tf.tidy(() => tf.transpose(this.embed))
    this.norm = r.vec('model.norm.weight', H)
    this.layers = []
    for (let l = 0; l < c.num_hidden_layers; l++) this.layers.push(loadLayer(r, c, this.dims, l))
    const freqs = rope(c, this.headDim)
    this.invFreq = freqs.invFreq
    this.ropeScale = freqs.scale
  }

  static fromWeights(config: LlamaConfig, weights: Map<string, Tensor>): LlamaModel {
    return new LlamaModel(config, weights)
  }

  get vocabSize(): number {
    return this.config.vocab_size
  }

  get layerCount(): number {
    return this.layers.length
  }

  newCache(): KVCache {
    return new KVCache(this.layers.length, this.kvHeads * this.headDim)
  }

  /**
   * Runs the steps' new tokens through the model, appends their keys and values to each cache, and
   * returns per step its logits, [positions × vocab] row by row (the last position, or all with
   * allLogits), read back in one transfer.
   */
  forward(steps: Step[]): Float32Array[] {
    const { ids, positions } = this.stack(steps)
    for (const s of steps) s.cache.reserve(s.tokens.length)
    const rotation = rotationOf(positions, this.invFreq, this.ropeScale)
    const ws = this.workspace
    const H = this.config.hidden_size
    let x = gatherInto(this.embed, ids, ws.get('x', ids.length * H))
    for (const [l, L] of this.layers.entries()) x = block(this.dims, L, l, x, steps, rotation, ws)
    const rows = this.wantedRows(steps)
    if (rows.length < ids.length) x = pickRows(x, rows, H, ws.get('picked', rows.length * H))
    // The logits are the caller's to keep (a fresh array): one per pass.
    const data = product(
      rmsNorm(x, this.norm, this.dims.eps, ws.get('h', x.length)),
      this.head,
      new Float32Array(rows.length * this.vocabSize),
    )
    for (const s of steps) s.cache.length += s.tokens.length
    const V = this.vocabSize
    const out: Float32Array[] = []
    let at = 0
    for (const s of steps) {
      const n = s.allLogits ? s.tokens.length : 1
      out.push(data.subarray(at * V, (at + n) * V))
      at += n
    }
    return out
  }

  /** The rows of the stacked tokens whose logits are wanted: each step's last, or all its rows with allLogits. */
  private wantedRows(steps: Step[]): number[] {
    const rows: number[] = []
    let at = 0
    for (const s of steps) {
      const n = s.tokens.length
      if (s.allLogits) for (let i = 0; i < n; i++) rows.push(at + i)
      else rows.push(at + n - 1)
      at += n
    }
    return rows
  }

  /** The steps' new tokens stacked, with their positions. */
  private stack(steps: Step[]): { ids: number[]; positions: number[] } {
    const ids: number[] = []
    const positions: number[] = []
    for (const s of steps) {
      if (s.cache.length + s.tokens.length > this.maxPositions)
        throw new Error(`a sequence of ${s.cache.length + s.tokens.length} positions is past the model's ${this.maxPositions}`)
      s.tokens.forEach((t, i) => {
        ids.push(t)
        positions.push(s.cache.length + i)
      })
    }
    return { ids, positions }
  }

  dispose(): void {
    const all: tf.Tensor[] = [this.embed, this.head]
    for (const L of this.layers) all.push(L.wqkv, L.wo, L.gateUp, L.down)
    for (const t of all) if (!t.isDisposed) t.dispose()
  }
}
