/**
 * `usage.completion_tokens_details.reasoning_tokens`: the generated tokens inside the reasoning
 * section. Counted on the token ids when the model has `<think>` and `</think>` as single tokens
 * (asked of the model once); otherwise the reasoning text is tokenized again.
 */
import type { ModelPool } from '../../inference/client.js'
import { countReasoningTokens, THINK_END, THINK_START, type ReasoningParserName } from '../../inference/parsers/reasoning.js'

const markers = new WeakMap<ModelPool, Promise<[number, number] | null>>()

async function markerIds(model: ModelPool): Promise<[number, number] | null> {
  const one = async (text: string) => {
    const r = await model.tokenize({ prompt: text, addSpecialTokens: false, returnTokenStrs: false })
    return r.ids.length === 1 ? r.ids[0]! : null
  }
  const [start, end] = await Promise.all([one(THINK_START), one(THINK_END)])
  return start === null || end === null ? null : [start, end]
}

export function reasoningCounter(model: ModelPool, kind: ReasoningParserName) {
  return async (ids: number[], reasoning: string): Promise<number> => {
    let m = markers.get(model)
    if (!m) markers.set(model, (m = markerIds(model).catch(() => null)))
    const found = await m
    if (found) return countReasoningTokens(kind, ids, found[0], found[1])
    if (!reasoning) return 0
    const r = await model.tokenize({ prompt: reasoning, addSpecialTokens: false, returnTokenStrs: false })
    return r.ids.length
  }
}
