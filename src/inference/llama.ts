import * as tf from '@tensorflow/tfjs'
import type { Tensor } from './safetensors.js'

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

interface Layer {
  inNorm: tf.Tensor1D
  postNorm: tf.Tensor1D
  /**
   * Projections stored transposed ([in, out]): x @ w. q, k and v are one product (their columns side
   * by side), as are gate and up: fewer, larger kernels per layer.
   */
  wqkv: tf.Tensor2D
  bqkv: tf.Tensor1D | null
  wo: tf.Tensor2D
  gateUp: tf.Tensor2D
  down: tf.Tensor2D
}

/** The keys and values a sequence has computed so far, per layer: [kv heads, length, head dim]. */
export class KVCache {
  keys: (tf.Tensor3D | null)[]
  values: (tf.Tensor3D | null)[]
  length = 0

  constructor(layers: number) {
    this.keys = new Array(layers).fill(null)
    this.values = new Array(layers).fill(null)
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t?.dispose()
    this.keys.fill(null)
    this.values.fill(null)
    this.length = 0
  }
}

/** One sequence's part of a forward pass: its new tokens, its cache, and whether logits of every new position are wanted (else the last only). */
export interface Step {
  tokens: number[]
  cache: KVCache
  allLogits?: boolean
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

/**
 * A decoder-only transformer of the Llama family in TF.js: RMSNorm, rotary embeddings (rotate-half),
 * grouped-query attention, SwiGLU MLP, optional q/k/v biases (Qwen2), tied or separate output head.
 * Several sequences go through one pass: their new tokens are stacked for every dense product;
 * attention runs per sequence against its own cache.
 */
export class LlamaModel {
  readonly heads: number
  readonly kvHeads: number
  readonly headDim: number
  readonly maxPositions: number
  private readonly eps: number
  private readonly embed: tf.Tensor2D
  /** The output head transposed ([hidden, vocab]). */
  private readonly head: tf.Tensor2D
  private readonly layers: Layer[]
  private readonly norm: tf.Tensor1D
  private readonly invFreq: tf.Tensor1D
  private readonly ropeScale: number

  private constructor(
    readonly config: LlamaConfig,
    w: Map<string, Tensor>,
  ) {
    const c = config
    this.heads = c.num_attention_heads
    this.kvHeads = c.num_key_value_heads ?? c.num_attention_heads
    this.headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads
    this.maxPositions = c.max_position_embeddings ?? 2048
    this.eps = c.rms_norm_eps ?? 1e-6
    if (c.hidden_act && c.hidden_act !== 'silu') throw new Error(`hidden_act ${c.hidden_act} is not supported (silu is)`)
    if (this.heads % this.kvHeads !== 0) throw new Error('num_attention_heads must be a multiple of num_key_value_heads')
    const get = (name: string, shape?: number[]): Tensor => {
      const t = w.get(name)
      if (!t) throw new Error(`weight ${name} is missing`)
      if (shape && (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])))
        throw new Error(`weight ${name} has shape [${t.shape}], expected [${shape}]`)
      return t
    }
    const vec = (name: string, n: number) => tf.tensor1d(get(name, [n]).data)
    const opt = (name: string, n: number) => (w.has(name) ? vec(name, n) : null)
    // HF linear weights are [out, in]; transposed once here.
    const lin = (name: string, out: number, inp: number) =>
      tf.tidy(() => tf.tensor2d(get(name, [out, inp]).data, [out, inp]).transpose<tf.Tensor2D>())
    const H = c.hidden_size
    const q = this.heads * this.headDim
    const kv = this.kvHeads * this.headDim
    this.embed = tf.tensor2d(get('model.embed_tokens.weight', [c.vocab_size, H]).data, [c.vocab_size, H])
    this.head =
      w.has('lm_head.weight') && !c.tie_word_embeddings
        ? lin('lm_head.weight', c.vocab_size, H)
        : tf.tidy(() => this.embed.transpose<tf.Tensor2D>())
    this.norm = vec('model.norm.weight', H)
    this.layers = []
    for (let l = 0; l < c.num_hidden_layers; l++) {
      const p = `model.layers.${l}`
      const side = (ts: tf.Tensor[], axis: number) => {
        const out = tf.concat(ts, axis)
        for (const t of ts) t.dispose()
        return out
      }
      const biases = [opt(`${p}.self_attn.q_proj.bias`, q), opt(`${p}.self_attn.k_proj.bias`, kv), opt(`${p}.self_attn.v_proj.bias`, kv)]
      const sizes = [q, kv, kv]
      this.layers.push({
        inNorm: vec(`${p}.input_layernorm.weight`, H),
        postNorm: vec(`${p}.post_attention_layernorm.weight`, H),
        wqkv: side(
          [
            lin(`${p}.self_attn.q_proj.weight`, q, H),
            lin(`${p}.self_attn.k_proj.weight`, kv, H),
            lin(`${p}.self_attn.v_proj.weight`, kv, H),
          ],
          1,
        ) as tf.Tensor2D,
        bqkv: biases.some((b) => b)
          ? (side(
              biases.map((b, i) => b ?? tf.zeros([sizes[i]!])),
              0,
            ) as tf.Tensor1D)
          : null,
        wo: lin(`${p}.self_attn.o_proj.weight`, H, q),
        gateUp: side(
          [lin(`${p}.mlp.gate_proj.weight`, c.intermediate_size, H), lin(`${p}.mlp.up_proj.weight`, c.intermediate_size, H)],
          1,
        ) as tf.Tensor2D,
        down: lin(`${p}.mlp.down_proj.weight`, H, c.intermediate_size),
      })
    }
    const r = rope(c, this.headDim)
    this.invFreq = tf.tensor1d(r.invFreq)
    this.ropeScale = r.scale
  }

  static fromWeights(config: LlamaConfig, weights: Map<string, Tensor>): LlamaModel {
    return new LlamaModel(config, weights)
  }

  get vocabSize(): number {
    return this.config.vocab_size
  }

  newCache(): KVCache {
    return new KVCache(this.layers.length)
  }

  private rmsNorm(x: tf.Tensor2D, w: tf.Tensor1D): tf.Tensor2D {
    return tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), this.eps))), w)
  }

  /** Rotary embedding of x [n, heads, headDim] at the given cos/sin [n, 1, headDim]. */
  private rope(x: tf.Tensor3D, cos: tf.Tensor3D, sin: tf.Tensor3D): tf.Tensor3D {
    const half = this.headDim / 2
    const [a, b] = tf.split(x, [half, half], 2)
    const rotated = tf.concat([tf.neg(b!), a!], 2)
    return tf.add(tf.mul(x, cos), tf.mul(rotated, sin))
  }

  /**
   * Runs the steps' new tokens through the model, appends their keys and values to each cache, and
   * returns per step the logits [positions, vocab] (the last position, or all with allLogits).
   * The caller disposes the returned tensors.
   */
  forward(steps: Step[]): tf.Tensor2D[] {
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
    const D = this.headDim
    const replaced: tf.Tensor[] = []
    const out = tf.tidy(() => {
      const angles = tf.outerProduct(tf.tensor1d(positions, 'float32'), this.invFreq)
      const full = tf.concat([angles, angles], 1).reshape([ids.length, 1, D])
      const cos = (this.ropeScale === 1 ? tf.cos(full) : tf.mul(tf.cos(full), this.ropeScale)) as tf.Tensor3D
      const sin = (this.ropeScale === 1 ? tf.sin(full) : tf.mul(tf.sin(full), this.ropeScale)) as tf.Tensor3D
      let x = tf.gather(this.embed, tf.tensor1d(ids, 'int32')) as tf.Tensor2D
      const kept: tf.Tensor[] = []
      for (const [l, L] of this.layers.entries()) {
        const h = this.rmsNorm(x, L.inNorm)
        const qkv = (L.bqkv ? tf.add(tf.matMul(h, L.wqkv), L.bqkv) : tf.matMul(h, L.wqkv)).reshape([
          ids.length,
          this.heads + 2 * this.kvHeads,
          D,
        ]) as tf.Tensor3D
        // q and k heads rotate together, then part.
        const [qk, v] = tf.split(qkv, [this.heads + this.kvHeads, this.kvHeads], 1) as [tf.Tensor3D, tf.Tensor3D]
        const [q, k] = tf.split(this.rope(qk, cos, sin), [this.heads, this.kvHeads], 1) as [tf.Tensor3D, tf.Tensor3D]
        const outs: tf.Tensor2D[] = []
        let at = 0
        for (const s of steps) {
          const n = s.tokens.length
          // [n, kvHeads, D] → [kvHeads, n, D]; for one token a reshape moves no data (one kernel fewer).
          const heads = (x: tf.Tensor3D) => (n === 1 ? x.reshape([this.kvHeads, 1, D]) : tf.transpose(x, [1, 0, 2])) as tf.Tensor3D
          const ks = heads(k.slice([at, 0, 0], [n, this.kvHeads, D]))
          const vs = heads(v.slice([at, 0, 0], [n, this.kvHeads, D]))
          const prevK = s.cache.keys[l]
          const prevV = s.cache.values[l]
          const K = prevK ? (tf.concat([prevK, ks], 1) as tf.Tensor3D) : ks
          const V = prevV ? (tf.concat([prevV, vs], 1) as tf.Tensor3D) : vs
          kept.push(K, V)
          if (prevK) replaced.push(prevK)
          if (prevV) replaced.push(prevV)
          s.cache.keys[l] = K
          s.cache.values[l] = V
          outs.push(this.attend(q.slice([at, 0, 0], [n, this.heads, D]), K, V, s.cache.length))
          at += n
        }
        const attn = outs.length === 1 ? outs[0]! : (tf.concat(outs, 0) as tf.Tensor2D)
        x = tf.add(x, tf.matMul(attn, L.wo))
        const h2 = this.rmsNorm(x, L.postNorm)
        const [g, u] = tf.split(tf.matMul(h2, L.gateUp), 2, 1)
        x = tf.add(x, tf.matMul(tf.mul(tf.mul(g!, tf.sigmoid(g!)), u!), L.down))
      }
      x = this.rmsNorm(x, this.norm)
      const logits: tf.Tensor2D[] = []
      let at = 0
      for (const s of steps) {
        const n = s.tokens.length
        const rows = s.allLogits ? x.slice([at, 0], [n, -1]) : x.slice([at + n - 1, 0], [1, -1])
        logits.push(tf.matMul(rows, this.head))
        at += n
      }
      // The caches' new tensors outlive this pass; everything else is freed.
      return { logits, kept }
    })
    // The tensors the caches held before this pass were replaced by longer ones.
    for (const t of replaced) t.dispose()
    for (const s of steps) s.cache.length += s.tokens.length
    return out.logits
  }

  /** Causal attention of q [n, heads, D] (positions from `past`) over K, V [kvHeads, past + n, D]; returns [n, heads × D]. */
  private attend(q: tf.Tensor3D, K: tf.Tensor3D, V: tf.Tensor3D, past: number): tf.Tensor2D {
    const n = q.shape[0]
    const D = this.headDim
    const g = this.heads / this.kvHeads
    const S = past + n
    // Heads of one key/value group side by side: [kvHeads, g × n, D].
    const qg =
      n === 1
        ? q.reshape([this.kvHeads, g, D])
        : tf.transpose(q.reshape([n, this.kvHeads, g, D]), [1, 2, 0, 3]).reshape([this.kvHeads, g * n, D])
    let scores = tf.mul(tf.matMul(qg, K, false, true), 1 / Math.sqrt(D)).reshape([this.kvHeads, g, n, S])
    if (n > 1) {
      // Query i (at position past + i) sees keys up to past + i.
      const mask = tf.tidy(() => {
        const rows = tf.range(0, n, 1, 'int32').reshape([n, 1])
        const cols = tf.range(0, S, 1, 'int32').reshape([1, S])
        return tf.where(tf.lessEqual(cols, tf.add(rows, past)), tf.zeros([n, S]), tf.fill([n, S], -Infinity))
      })
      scores = tf.add(scores, mask)
    }
    const p = tf.softmax(scores).reshape([this.kvHeads, g * n, S])
    const o = tf.matMul(p, V).reshape([this.kvHeads, g, n, D])
    return (n === 1 ? o.reshape([1, this.heads * D]) : tf.transpose(o, [2, 0, 1, 3]).reshape([n, this.heads * D])) as tf.Tensor2D
  }

  dispose(): void {
    const all: tf.Tensor[] = [this.embed, this.head, this.norm, this.invFreq]
    for (const L of this.layers) all.push(...(Object.values(L).filter((t) => t !== null) as tf.Tensor[]))
    for (const t of all) if (!t.isDisposed) t.dispose()
  }
}
