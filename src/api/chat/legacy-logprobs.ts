/**
 * Logprobs in the legacy completions shape (parallel lists: `tokens`, `token_logprobs`,
 * `top_logprobs` as token → logprob maps, `text_offset`), made from the engine's per-token entries
 * and, with `echo`, the prompt's (the first prompt token has nothing before it: null).
 */
import type { PromptLogprobs, TokenLogprob } from '../../inference/protocol.js'
import type { LegacyLogprobs } from '../../schemas/completions.js'

/** One position: its token's text, its logprob and the alternatives (the sampled token first). */
export interface LegacyEntry {
  token: string
  logprob: number | null
  top: Record<string, number> | null
}

/** Python's len(): offsets count code points, not UTF-16 units. */
const codePoints = (s: string) => {
  let n = 0
  for (const _ of s) n++
  return n
}

/** The map as vLLM's dict comprehension makes it: in order, a later entry with the same text overwriting the value. */
function topMap(entries: [string, number][]): Record<string, number> {
  const top: Record<string, number> = {}
  for (const [k, v] of entries) top[k] = v
  return top
}

/** Sampled tokens: the token itself leads its alternatives, as in vLLM. */
export function generatedEntries(lps: TokenLogprob[]): LegacyEntry[] {
  return lps.map((lp) => ({
    token: lp.token,
    logprob: lp.logprob,
    top: topMap([[lp.token, lp.logprob], ...lp.top_logprobs.map((a) => [a.token, a.logprob] as [string, number])]),
  }))
}

/**
 * Prompt tokens, from the engine's prompt logprobs (keyed by token id, the actual token first).
 * `first` is the first token's text; `asIds`: tokens written `token_id:<id>`.
 */
export function promptEntries(ids: number[], plp: PromptLogprobs, first: string, asIds: boolean): LegacyEntry[] {
  const name = (id: number, text: string) => (asIds ? `token_id:${id}` : text)
  return ids.map((id, i) => {
    const entry = plp[i]
    if (i === 0 || !entry) return { token: name(id, i === 0 ? first : ''), logprob: null, top: null }
    const own = entry[String(id)]!
    // The actual token first, then the alternatives by rank (the record's own key order is numeric).
    const others = Object.entries(entry)
      .filter(([k]) => k !== String(id))
      .sort((a, b) => a[1].rank - b[1].rank)
    const top = topMap([[String(id), own] as const, ...others].map(([k, v]) => [name(Number(k), v.decoded_token), v.logprob]))
    return { token: name(id, own.decoded_token), logprob: own.logprob, top }
  })
}

/** The lists, offsets counted from `offset` (the text already sent before these tokens). */
export function legacyLogprobs(entries: LegacyEntry[], offset: number): LegacyLogprobs {
  const out: LegacyLogprobs = { text_offset: [], token_logprobs: [], tokens: [], top_logprobs: [] }
  let at = offset
  for (const e of entries) {
    out.text_offset.push(at)
    at += codePoints(e.token)
    out.tokens.push(e.token)
    out.token_logprobs.push(e.logprob)
    out.top_logprobs.push(e.top)
  }
  return out
}

/** Where the next token's offset starts after these entries. */
export const offsetAfter = (l: LegacyLogprobs, offset: number): number =>
  l.tokens.length ? l.text_offset[l.text_offset.length - 1]! + codePoints(l.tokens[l.tokens.length - 1]!) : offset
