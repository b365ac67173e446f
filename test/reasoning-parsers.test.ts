import t from 'tap'
import { countReasoningTokens, ReasoningStream, splitReasoning, type ReasoningParserName } from '../src/inference/parsers/reasoning.js'
import { rng } from './helpers/rng.js'

t.test('both parsers split <think>…</think> the reply opens with', async (t) => {
  for (const kind of ['deepseek_r1', 'qwen3'] as const) {
    t.same(splitReasoning(kind, '<think>Paris is in France.</think>The capital is Paris.'), {
      reasoning: 'Paris is in France.',
      content: 'The capital is Paris.',
    })
    t.same(splitReasoning(kind, '<think>only thinking</think>'), { reasoning: 'only thinking', content: null })
    t.same(splitReasoning(kind, '<think></think>answer'), { reasoning: '', content: 'answer' })
    t.same(splitReasoning(kind, '<think>cut off by max_tokens'), { reasoning: 'cut off by max_tokens', content: null })
  }
})

t.test('without the opening tag: deepseek_r1 is already reasoning, qwen3 is content', async (t) => {
  t.same(splitReasoning('deepseek_r1', 'step one, step two</think>42'), { reasoning: 'step one, step two', content: '42' })
  t.same(splitReasoning('deepseek_r1', 'still thinking'), { reasoning: 'still thinking', content: null })
  t.same(splitReasoning('qwen3', 'step one</think>42'), { reasoning: null, content: 'step one</think>42' })
  t.same(splitReasoning('qwen3', 'Just an answer.'), { reasoning: null, content: 'Just an answer.' })
  t.same(splitReasoning('qwen3', 'An answer with <think>later</think>'), {
    reasoning: null,
    content: 'An answer with <think>later</think>',
  })
})

function streamed(kind: ReasoningParserName, text: string, seed: number) {
  const r = rng(seed)
  const s = new ReasoningStream(kind)
  let reasoning = ''
  let content = ''
  for (let i = 0; i < text.length;) {
    const n = 1 + Math.floor(r() * 4)
    const o = s.push(text.slice(i, i + n))
    reasoning += o.reasoning
    content += o.content
    i += n
  }
  const o = s.end()
  return { reasoning: reasoning + o.reasoning, content: content + o.content }
}

t.test("streaming in any pieces gives the whole text's split, tags never leaking", async (t) => {
  const texts = [
    '<think>a < b and </thin is not the end</think>so a',
    'no tags here',
    '</think>x',
    '<thin',
    '<think>x</think>y</think>z',
    '',
  ]
  for (const kind of ['deepseek_r1', 'qwen3'] as const)
    for (const [i, text] of texts.entries())
      for (const seed of [1, 2, 3]) {
        const whole = splitReasoning(kind, text)
        const s = streamed(kind, text, seed * 7 + i)
        t.equal(s.reasoning, whole.reasoning ?? '', `${kind} reasoning of ${JSON.stringify(text)}`)
        t.equal(s.content, whole.content ?? '', `${kind} content of ${JSON.stringify(text)}`)
      }
})

t.test('reasoning tokens are the ids inside the section', async (t) => {
  const [S, E] = [900, 901]
  t.equal(countReasoningTokens('qwen3', [S, 1, 2, 3, E, 4, 5], S, E), 3)
  t.equal(countReasoningTokens('qwen3', [1, 2, E, 4], S, E), 0)
  t.equal(countReasoningTokens('deepseek_r1', [1, 2, E, 4], S, E), 2)
  t.equal(countReasoningTokens('deepseek_r1', [S, 1, 2], S, E), 2)
  t.equal(countReasoningTokens('deepseek_r1', [], S, E), 0)
})
