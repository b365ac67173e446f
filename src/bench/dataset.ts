import { readFile } from 'node:fs/promises'
import { getJson, mapLimit, postJson } from './http.js'
import { Rng } from './random.js'
import type { BenchRequest } from './request.js'

/** Where prompts come from, and what a random prompt looks like. */
export interface DatasetOptions {
  dataset: string
  numPrompts: number
  inputLen: number
  outputLen: number
  rangeRatio: number
  seed: number
  /** The model server (for its vocabulary) and the trace server (for weave:// datasets). */
  baseUrl: string
  model: string
  headers: Record<string, string>
  traceUrl: string
  traceHeaders: Record<string, string>
}

/** Text the server tokenizes to show us its vocabulary; the ids it yields are what random prompts are drawn from. */
const SEED_TEXT =
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her ' +
  'she there been one all we their has would when if so no what up out about into than them can only other time new some ' +
  'could these two may first then do any like my now over such our man me even most made after also did many before must ' +
  'through back years where much your way well down should because each just those people how too little state good very ' +
  'make world still own see men work long get here between both life being under never day same another know while last ' +
  'might us great old year off come since against go came right used take three 0 1 2 3 4 5 6 7 8 9 . , ; : ! ? ( ) " - '

const WORDS = SEED_TEXT.split(' ').filter((w) => /^[a-z]+$/.test(w))

/** The token ids the server's /tokenize gives for the seed text (vLLM's shape, then llama.cpp's); null when it has none. */
async function vocabulary(o: DatasetOptions): Promise<number[] | null> {
  for (const body of [{ model: o.model, prompt: SEED_TEXT, add_special_tokens: false }, { content: SEED_TEXT }]) {
    try {
      const r = await postJson<{ tokens?: number[] }>(o.baseUrl + '/tokenize', body, o.headers)
      if (Array.isArray(r.tokens) && r.tokens.length) return [...new Set(r.tokens)]
    } catch {
      // Not this shape, or no /tokenize at all.
    }
  }
  return null
}

async function detokenize(o: DatasetOptions, tokens: number[]): Promise<string> {
  const r = await postJson<{ prompt?: string; content?: string }>(o.baseUrl + '/detokenize', { model: o.model, tokens }, o.headers)
  return r.prompt ?? r.content ?? ''
}

/** Lengths uniform in `len · (1 ± ratio)`, both ends included, as vLLM draws them. */
function lengths(rng: Rng, len: number, ratio: number, min: number): number {
  return Math.max(min, rng.int(Math.trunc(len * (1 - ratio)), Math.trunc(len * (1 + ratio))))
}

/** Random prompts: random ids from the server's vocabulary decoded to text, or random words when it has no tokenizer API. */
async function randomRequests(o: DatasetOptions): Promise<BenchRequest[]> {
  const rng = new Rng(o.seed)
  const shapes = Array.from({ length: o.numPrompts }, () => ({
    inLen: lengths(rng, o.inputLen, o.rangeRatio, 1),
    outLen: lengths(rng, o.outputLen, o.rangeRatio, 1),
  }))
  const vocab = await vocabulary(o)
  const ids = shapes.map((s) =>
    Array.from({ length: s.inLen }, () => (vocab ? vocab[rng.int(0, vocab.length - 1)]! : rng.int(0, WORDS.length - 1))),
  )
  const texts = vocab ? await mapLimit(ids, 8, (x) => detokenize(o, x)) : ids.map((x) => x.map((i) => WORDS[i]!).join(' '))
  return shapes.map((s, i) => ({ prompt: texts[i]!, promptLen: s.inLen, outputLen: s.outLen }))
}

/** A row as a request: its prompt under a usual name (or the last message), its output length if it gives one. */
function rowRequest(row: unknown, outputLen: number): BenchRequest {
  const r = (typeof row === 'string' ? { prompt: row } : (row ?? {})) as Record<string, unknown>
  const messages = Array.isArray(r.messages) ? (r.messages as { content?: unknown }[]) : null
  const prompt = r.prompt ?? r.text ?? r.question ?? r.input ?? messages?.[messages.length - 1]?.content
  if (typeof prompt !== 'string')
    throw new Error(`a dataset row has no prompt (prompt, text, question, input or messages): ${JSON.stringify(row).slice(0, 200)}`)
  const out = Number(r.output_len ?? r.max_tokens ?? outputLen)
  return { prompt, promptLen: null, outputLen: Number.isInteger(out) && out > 0 ? out : outputLen }
}

/** `num` requests from the rows, cycling through them when there are fewer. */
function take(rows: unknown[], o: DatasetOptions): BenchRequest[] {
  if (rows.length === 0) throw new Error(`the dataset ${o.dataset} has no rows`)
  return Array.from({ length: o.numPrompts }, (_, i) => rowRequest(rows[i % rows.length], o.outputLen))
}

const WEAVE_REF = /^weave:\/\/\/([^/]+)\/([^/]+)\/object\/([^:/]+):([^/]+)$/

/** A Dataset object's rows, read through the trace API: the object for its table ref, then the table's rows. */
async function weaveRows(o: DatasetOptions): Promise<unknown[]> {
  const m = WEAVE_REF.exec(o.dataset)
  if (!m) throw new Error(`a dataset ref looks like weave:///entity/project/object/name:digest, not ${o.dataset}`)
  const [, entity, project, name, digest] = m
  const project_id = `${entity}/${project}`
  const obj = await postJson<{ obj: { val: { rows?: unknown } } }>(
    o.traceUrl + '/obj/read',
    { project_id, object_id: name, digest },
    o.traceHeaders,
  )
  const rowsRef = obj.obj.val.rows
  const table = typeof rowsRef === 'string' ? /\/table\/([^/]+)$/.exec(rowsRef)?.[1] : undefined
  if (!table) throw new Error(`${o.dataset} is not a Dataset (no table of rows)`)
  const rows: unknown[] = []
  for (let offset = 0; rows.length < o.numPrompts; offset += 1000) {
    const page = await postJson<{ rows: { val: unknown }[] }>(
      o.traceUrl + '/table/query',
      { project_id, digest: table, limit: 1000, offset },
      o.traceHeaders,
    )
    rows.push(...page.rows.map((r) => r.val))
    if (page.rows.length < 1000) break
  }
  return rows
}

async function fileRows(file: string): Promise<unknown[]> {
  const text = await readFile(file, 'utf8')
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l, i) => {
      try {
        return JSON.parse(l) as unknown
      } catch {
        throw new Error(`${file}:${i + 1} is not JSON`)
      }
    })
}

export async function loadRequests(o: DatasetOptions): Promise<BenchRequest[]> {
  if (o.dataset === 'random') return randomRequests(o)
  if (o.dataset.startsWith('weave:')) return take(await weaveRows(o), o)
  return take(await fileRows(o.dataset), o)
}

/** The served model when none is named: the first of /v1/models. */
export async function firstModel(baseUrl: string, headers: Record<string, string>): Promise<string> {
  const r = await getJson<{ data?: { id: string }[] }>(baseUrl + '/v1/models', headers)
  const id = r.data?.[0]?.id
  if (!id) throw new Error(`${baseUrl}/v1/models lists no model; pass --model`)
  return id
}
