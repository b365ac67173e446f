/**
 * The model's vocabulary as xgrammar takes it: every token's entry by id (as tokenizer.json spells
 * it, e.g. `Ġhello` or `<0x0A>`), how those entries map to bytes, and which ids end a generation.
 * Special tokens go in as empty strings: their text is dropped from the reply (skip_special_tokens),
 * so a grammar must never be satisfied by one.
 */
import fs from 'node:fs/promises'
import path from 'node:path'

export interface GrammarVocab {
  encoded: string[]
  /** `byte_level` (GPT-2 style), `byte_fallback` (SentencePiece with <0xXX> tokens) or `raw`. */
  type: 'byte_level' | 'byte_fallback' | 'raw'
  prependSpace: boolean
  /** The logits' width (config.json's vocab_size, which may pad the tokenizer's). */
  size: number
  stopIds: number[]
}

interface TokenizerJson {
  model?: { vocab?: Record<string, number> | [string, number][]; type?: string }
  added_tokens?: { id: number; content: string; special?: boolean }[]
  decoder?: Decoder | null
  normalizer?: { type?: string; prepend?: string; normalizers?: { type?: string; prepend?: string }[] } | null
  pre_tokenizer?: { type?: string; prepend_scheme?: string; add_prefix_space?: boolean; pretokenizers?: unknown[] } | null
}
interface Decoder {
  type?: string
  decoders?: Decoder[]
}

function decoderTypes(d: Decoder | null | undefined): string[] {
  if (!d) return []
  return [d.type ?? '', ...(d.decoders ?? []).flatMap(decoderTypes)]
}

/** As xgrammar's own detection from a Hugging Face tokenizer: the decoder says how entries become bytes. */
function vocabType(j: TokenizerJson): Pick<GrammarVocab, 'type' | 'prependSpace'> {
  const types = decoderTypes(j.decoder)
  if (types.includes('ByteLevel')) return { type: 'byte_level', prependSpace: false }
  const normalizers = j.normalizer ? [j.normalizer, ...(j.normalizer.normalizers ?? [])] : []
  const prepend =
    normalizers.some((n) => n.type === 'Prepend' && n.prepend === '\u2581') ||
    (j.pre_tokenizer?.type === 'Metaspace' && j.pre_tokenizer.prepend_scheme !== 'never')
  if (types.includes('ByteFallback')) return { type: 'byte_fallback', prependSpace: prepend }
  return { type: 'raw', prependSpace: prepend }
}

/** Reads the model directory's tokenizer.json. */
export async function readGrammarVocab(dir: string, size: number, stopIds: Iterable<number>): Promise<GrammarVocab> {
  const j = JSON.parse(await fs.readFile(path.join(dir, 'tokenizer.json'), 'utf8')) as TokenizerJson
  const encoded: string[] = []
  const vocab = j.model?.vocab ?? {}
  const entries = Array.isArray(vocab) ? vocab.map(([t], i) => [t, i] as const) : Object.entries(vocab)
  for (const [token, id] of entries) if (id < size) encoded[id] = token
  for (const a of j.added_tokens ?? []) if (a.id < size) encoded[a.id] = a.special ? '' : a.content
  const last = encoded.length
  for (let i = 0; i < last; i++) if (encoded[i] === undefined) encoded[i] = ''
  return { encoded, ...vocabType(j), size, stopIds: [...stopIds] }
}
