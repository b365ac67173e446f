import fs from 'node:fs/promises'
import path from 'node:path'
import { writeSafetensors, type Tensor } from './safetensors.js'

/**
 * A small Llama-architecture model made deterministically, so that `npm start` serves chat with
 * nothing downloaded: a byte-level BPE tokenizer trained on the text below, a ChatML chat template
 * with tools and generation prompt, and weights drawn from a fixed seed. Its replies are noise; it
 * exists to exercise the whole path (and, in tests, to compare with reference implementations).
 */
export interface TinyModelOptions {
  /** `qwen2` adds the q/k/v projection biases. */
  arch?: 'llama' | 'qwen2'
  hidden?: number
  layers?: number
  heads?: number
  kvHeads?: number
  intermediate?: number
  merges?: number
  seed?: number
  maxPositions?: number
  ropeScaling?: Record<string, unknown> | null
  tieEmbeddings?: boolean
}

const CORPUS = `
The weft runs across the warp, over and under, until the cloth holds together. A loom is a patient machine:
each pass of the shuttle adds one thread, and a thousand passes make a pattern that none of them could show alone.
Questions and answers pass the same way between a person and a model. The user asks; the assistant replies;
a tool is called when the answer needs a number, a date or a fact from somewhere else.
What is the weather in Paris today? Let me check the forecast. It is 18 degrees and cloudy, with rain after six.
Please write a short poem about rivers. Rivers run to the sea, and the sea sends rain back to the hills again.
function add(a, b) { return a + b; } const total = add(40, 2); console.log("total:", total);
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
Numbers: 0 1 2 3 4 5 6 7 8 9 10 20 42 100 2026. Lists: first, second, third; yes or no; true, false, null.
Thank you! You're welcome. I don't know, but I can find out. Here is what I found, step by step.
`

const SPECIAL = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>']

/** The byte ↔ printable-character map of byte-level BPE: printable bytes map to themselves, the rest past 255. */
export function byteChars(): string[] {
  const keep: number[] = []
  for (let b = 33; b <= 126; b++) keep.push(b)
  for (let b = 161; b <= 172; b++) keep.push(b)
  for (let b = 174; b <= 255; b++) keep.push(b)
  const out: string[] = new Array(256)
  let extra = 0
  for (let b = 0; b < 256; b++) out[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++)
  return out
}

/** The split byte-level BPE applies before merging (the GPT-2 pattern). */
const SPLIT = /'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu

/** Learns `count` merges from the corpus: the most frequent adjacent pair each time, ties by the pair's text. */
function trainMerges(count: number, chars: string[]): [string, string][] {
  const words = new Map<string, number>()
  for (const w of CORPUS.match(SPLIT) ?? []) {
    const mapped = [...Buffer.from(w, 'utf8')].map((b) => chars[b]!).join('\u0000')
    words.set(mapped, (words.get(mapped) ?? 0) + 1)
  }
  let seqs = [...words.entries()].map(([w, n]) => ({ parts: w.split('\u0000'), n }))
  const merges: [string, string][] = []
  while (merges.length < count) {
    const pairs = new Map<string, number>()
    for (const { parts, n } of seqs)
      for (let i = 0; i + 1 < parts.length; i++) {
        const k = parts[i] + '\u0000' + parts[i + 1]
        pairs.set(k, (pairs.get(k) ?? 0) + n)
      }
    let best: string | null = null
    let bestN = 0
    for (const [k, n] of pairs) if (n > bestN || (n === bestN && best !== null && k < best)) [best, bestN] = [k, n]
    if (best === null || bestN < 2) break
    const [a, b] = best.split('\u0000') as [string, string]
    merges.push([a, b])
    seqs = seqs.map(({ parts, n }) => {
      const next: string[] = []
      for (let i = 0; i < parts.length; i++) {
        if (i + 1 < parts.length && parts[i] === a && parts[i + 1] === b) (next.push(a + b), i++)
        else next.push(parts[i]!)
      }
      return { parts: next, n }
    })
  }
  return merges
}

/** The chat template: ChatML turns; tools offered in the system turn, calls and results tagged. */
export const CHAT_TEMPLATE = `{%- set sys = messages[0].role == 'system' -%}
{%- if tools -%}
{{- '<|im_start|>system\\n' -}}
{%- if sys -%}{{- messages[0].content + '\\n\\n' -}}{%- endif -%}
{{- 'You can call functions. They are listed in <tools></tools>:\\n<tools>' -}}
{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\\n</tools>\\n\\nTo call one, reply with {"name": <function name>, "arguments": <arguments object>} inside <tool_call></tool_call>.<|im_end|>\\n' -}}
{%- elif sys -%}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}
{%- endif -%}
{%- if documents -%}
{{- '<|im_start|>system\\nDocuments:' -}}
{%- for doc in documents -%}{{- '\\n[' + (loop.index | string) + '] ' + (doc.title or '') + '\\n' + (doc.text or '') -}}{%- endfor -%}
{{- '<|im_end|>\\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if loop.first and sys -%}
{%- elif message.role == 'assistant' -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if message.content -%}{{- message.content -}}{%- endif -%}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{{- '\\n<tool_call>\\n{"name": "' + call.function.name + '", "arguments": ' + (call.function.arguments | tojson) + '}\\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- elif message.role == 'tool' -%}
{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' -}}
{%- else -%}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}`

/** A seeded generator (mulberry32) and normal draws from it (Box–Muller). */
function random(seed: number) {
  let s = seed >>> 0
  const uniform = () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const normal = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform())
  return { uniform, normal }
}

/** Writes the model directory (config, weights, tokenizer, template, generation defaults). */
export async function makeTinyModel(dir: string, o: TinyModelOptions = {}): Promise<void> {
  const arch = o.arch ?? 'llama'
  const hidden = o.hidden ?? 64
  const layers = o.layers ?? 2
  const heads = o.heads ?? 4
  const kvHeads = o.kvHeads ?? 2
  const headDim = hidden / heads
  const intermediate = o.intermediate ?? 176
  const tie = o.tieEmbeddings ?? true
  const chars = byteChars()
  const merges = trainMerges(o.merges ?? 249, chars)
  const vocab: Record<string, number> = {}
  for (let b = 0; b < 256; b++) vocab[chars[b]!] = b
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length
  const base = Object.keys(vocab).length
  const added = SPECIAL.map((content, i) => ({
    id: base + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }))
  const vocabSize = base + added.length
  const id = (t: string) => added.find((a) => a.content === t)!.id

  const rng = random(o.seed ?? 20261122)
  const tensors = new Map<string, Tensor>()
  const draw = (name: string, shape: number[], std: number) => {
    const n = shape.reduce((a, b) => a * b, 1)
    const data = new Float32Array(n)
    for (let i = 0; i < n; i++) data[i] = rng.normal() * std
    tensors.set(name, { shape, data })
  }
  const ones = (name: string, n: number) => tensors.set(name, { shape: [n], data: new Float32Array(n).fill(1) })
  const w = 1 / Math.sqrt(hidden)
  draw('model.embed_tokens.weight', [vocabSize, hidden], 0.05)
  for (let l = 0; l < layers; l++) {
    const p = `model.layers.${l}`
    ones(`${p}.input_layernorm.weight`, hidden)
    ones(`${p}.post_attention_layernorm.weight`, hidden)
    draw(`${p}.self_attn.q_proj.weight`, [heads * headDim, hidden], w)
    draw(`${p}.self_attn.k_proj.weight`, [kvHeads * headDim, hidden], w)
    draw(`${p}.self_attn.v_proj.weight`, [kvHeads * headDim, hidden], w)
    draw(`${p}.self_attn.o_proj.weight`, [hidden, heads * headDim], w)
    if (arch === 'qwen2') {
      draw(`${p}.self_attn.q_proj.bias`, [heads * headDim], 0.1)
      draw(`${p}.self_attn.k_proj.bias`, [kvHeads * headDim], 0.1)
      draw(`${p}.self_attn.v_proj.bias`, [kvHeads * headDim], 0.1)
    }
    draw(`${p}.mlp.gate_proj.weight`, [intermediate, hidden], w)
    draw(`${p}.mlp.up_proj.weight`, [intermediate, hidden], w)
    draw(`${p}.mlp.down_proj.weight`, [hidden, intermediate], 1 / Math.sqrt(intermediate))
  }
  ones('model.norm.weight', hidden)
  if (!tie) draw('lm_head.weight', [vocabSize, hidden], w)

  await fs.mkdir(dir, { recursive: true })
  const eos = id('<|im_end|>')
  const config = {
    architectures: [arch === 'qwen2' ? 'Qwen2ForCausalLM' : 'LlamaForCausalLM'],
    model_type: arch,
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: headDim,
    hidden_act: 'silu',
    max_position_embeddings: o.maxPositions ?? 4096,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    rope_scaling: o.ropeScaling ?? null,
    tie_word_embeddings: tie,
    vocab_size: vocabSize,
    bos_token_id: null,
    eos_token_id: eos,
    torch_dtype: 'float32',
    ...(arch === 'qwen2' ? { attention_bias: true } : { attention_bias: false }),
  }
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  }
  const tokenizerConfig = {
    add_bos_token: false,
    add_eos_token: false,
    bos_token: null,
    eos_token: '<|im_end|>',
    pad_token: '<|endoftext|>',
    model_max_length: config.max_position_embeddings,
    clean_up_tokenization_spaces: false,
    tokenizer_class: 'PreTrainedTokenizerFast',
    added_tokens_decoder: Object.fromEntries(
      added.map((a) => [
        String(a.id),
        { content: a.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true },
      ]),
    ),
    chat_template: CHAT_TEMPLATE,
  }
  const generation = { eos_token_id: [eos, id('<|endoftext|>')], pad_token_id: id('<|endoftext|>') }
  await writeSafetensors(path.join(dir, 'model.safetensors'), tensors, { format: 'pt' })
  await fs.writeFile(path.join(dir, 'config.json'), JSON.stringify(config, null, 2) + '\n')
  await fs.writeFile(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizer) + '\n')
  await fs.writeFile(path.join(dir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig, null, 2) + '\n')
  await fs.writeFile(path.join(dir, 'generation_config.json'), JSON.stringify(generation, null, 2) + '\n')
}
